-- A lane partition was dropped: forget its generation.
DELETE FROM lane_generations WHERE gen = $1
