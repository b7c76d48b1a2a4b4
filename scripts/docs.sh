#!/usr/bin/env bash
# Builds the documentation: the MkDocs site from docs/ (strict: a broken
# link, a page missing from the nav or a missing page fails) and the
# Doxygen API reference of the installed public headers (warnings are
# errors), into SITE_DIR (default build/site). Needs no network.
#
#   scripts/docs.sh            (SITE_DIR, DOCS_WORK_DIR to change where)
set -euo pipefail
cd "$(dirname "$0")/.."
SITE_DIR=${SITE_DIR:-build/site}
WORK=${DOCS_WORK_DIR:-build/docs-work}
for tool in mkdocs doxygen; do
  command -v "$tool" >/dev/null || { echo "docs.sh: $tool not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
done
rm -rf "$WORK" && mkdir -p "$WORK"
# The site is built from a copy of docs/ with the API reference inside it,
# so the strict link check also sees the reference's pages.
cp -r docs "$WORK/docs"
cp mkdocs.yml "$WORK/mkdocs.yml"
mkdir -p "$WORK/doxygen"
( cat docs/Doxyfile; echo "OUTPUT_DIRECTORY = $WORK/doxygen" ) >"$WORK/Doxyfile"
# WARN_AS_ERROR = FAIL_ON_WARNINGS (docs/Doxyfile): every warning is
# printed, and any fails the build.
if ! doxygen "$WORK/Doxyfile" >"$WORK/doxygen.log" 2>"$WORK/doxygen.warnings" \
   || [ -s "$WORK/doxygen.warnings" ]; then
  sed "s|^$PWD/||" "$WORK/doxygen.warnings" >&2
  echo "docs.sh: doxygen failed: every public type, function and field of the installed headers needs a /// comment" >&2
  exit 1
fi
mv "$WORK/doxygen/html" "$WORK/docs/reference"
rm -f "$WORK/docs/Doxyfile"
mkdocs build --strict -f "$WORK/mkdocs.yml" -d "$(realpath -m "$SITE_DIR")"
echo "docs.sh: site in $SITE_DIR (open $SITE_DIR/index.html; API reference: $SITE_DIR/reference/index.html)"
