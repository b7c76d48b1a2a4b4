// The binary's commands: each one's options and what it runs, then the
// table app/main.cpp builds the command line from.

#include "actor_worker/app/cli/command_table.hpp"

#include <CLI/CLI.hpp>

#include "actor_worker/app/log_format.hpp"

namespace aw::cli {

const runtime_config& invocation::config(bool select_node) {
  if (!config_) {
    config_sources sources;
    sources.file = options.config_file;
    sources.database_url = options.database_url;
    sources.node = options.node;
    sources.select_node = select_node;
    config_ = resolve_config(sources);
    configure_log_format(config_->log);
  }
  return *config_;
}

runtime_config invocation::on(const std::string& queue) {
  return config().routed(options.database, queue);
}

namespace {

// -- the worker ---------------------------------------------------------------

int migrate(invocation& at) {
  return migrate_schema(at.config(), at.options.database);
}

void run_options(CLI::App& cmd, parsed_options& o) {
  cmd.add_option("--node", o.node,
                 "the node of a cluster file to run (default: [worker] "
                 "node, then the host name)");
}

int run(invocation& at) {
  auto& cfg = at.config(true);
  if (!at.options.database.empty())
    throw usage_error("--database does not go with `run`: a node runs the "
                      "queues of every database its file maps them to");
  return run_worker(cfg);
}

// -- the cluster --------------------------------------------------------------
// The listings cover every database unless --database names one.

/// A listing (nodes, queues, periodic) of every database of the
/// configuration, or of --database's.
int listing(invocation& at,
            int (*list)(const runtime_config&, const std::string&, bool)) {
  return list(at.config(), at.options.database, at.options.json);
}

int nodes(invocation& at) {
  return listing(at, list_nodes);
}

int queues(invocation& at) {
  return listing(at, list_queues);
}

void queue_control_options(CLI::App& cmd, parsed_options& o) {
  cmd.add_option("QUEUE", o.control_queue, "the queue")->required();
}

int pause(invocation& at) {
  auto& queue = at.options.control_queue;
  return control_queue_cmd(at.on(queue), queue, true);
}

int resume(invocation& at) {
  auto& queue = at.options.control_queue;
  return control_queue_cmd(at.on(queue), queue, false);
}

int periodic(invocation& at) {
  return listing(at, list_periodic);
}

int check(invocation& at) {
  return check_config(at.options.config_file, at.options.json);
}

// -- enqueue ------------------------------------------------------------------

void enqueue_options_of(CLI::App& cmd, parsed_options& o) {
  auto& enq = o.enqueue;
  cmd.add_option("KIND", enq.kind, "job kind");
  cmd.add_option("ARGS_JSON", enq.args,
                 "job args as a JSON object (default {}); @FILE reads them "
                 "from FILE, - from stdin");
  cmd.add_option("--queue", enq.queue, "queue (default 'default')");
  cmd.add_option("--priority", enq.priority, "lower runs first (default 0)");
  cmd.add_option("--max-attempts", enq.max_attempts,
                 "run at most N times (1 to 1000000)")
    ->check(CLI::Range(1, defaults::max_attempts_limit));
  cmd.add_option("--delay", enq.delay,
                 "run after SECONDS (or a duration: 500ms, 2m)");
  cmd.add_option("--run-at", enq.run_at,
                 "run at or after TIME, an RFC 3339 timestamp "
                 "(2030-01-02T03:04:05Z); excludes --delay");
  cmd.add_option("--tags", enq.tags, "tags, comma-separated: a,b");
  cmd.add_option("--metadata", enq.metadata,
                 "a JSON object stored with the job");
  cmd.add_flag("--unique", enq.unique,
               "at most one such job (same kind and args) at a time; a "
               "duplicate prints the existing job's id (and says so on "
               "stderr)");
  // Given, an empty key is refused rather than taken as none.
  cmd.add_option("--ordering-key", enq.ordering_key,
                 "jobs with the same key run one at a time, in order (not "
                 "empty)")
    ->each([&enq](const std::string&) { enq.ordering_key_given = true; });
  cmd.add_option("--deadline", enq.deadline,
                 "cancel and rescue a run longer than SECONDS (or a "
                 "duration: 30s, 5m)");
  cmd.add_option("--jsonl", enq.jsonl,
                 "enqueue every job of FILE (- for stdin), one JSON object "
                 "per line, in one transaction; prints the count (the flags "
                 "above are defaults for its lines)");
}

int enqueue(invocation& at) {
  return enqueue_job(at.on(at.options.enqueue.queue), at.options.enqueue);
}

// -- jobs ---------------------------------------------------------------------

void jobs_list_options_of(CLI::App& cmd, parsed_options& o) {
  auto& list = o.list;
  cmd.add_option("--state", list.state,
                 "only jobs in this state (scheduled, available, running, "
                 "waiting_external, completed, cancelled)");
  cmd.add_option("--queue", list.queue, "only this queue");
  cmd.add_option("--kind", list.kind, "only this kind");
  cmd.add_option("--limit", list.limit, "at most N rows (default 100)")
    ->check(CLI::Range(int64_t{1}, int64_t{1'000'000}));
  cmd.add_option("--after", list.after,
                 "only ids greater than ID (the next page: the last id "
                 "shown)")
    ->check(CLI::NonNegativeNumber);
  cmd.add_flag("--json", list.json,
               "a JSON array of objects keyed by the jobs columns");
}

int jobs_list(invocation& at) {
  auto& list = at.options.list;
  return list_jobs(at.on(list.queue), list);
}

/// `jobs show|cancel|retry ID`.
void job_id_options(CLI::App& cmd, parsed_options& o) {
  cmd.add_option("ID", o.job_id, "job id")->required();
}

int job_show(invocation& at) {
  return show_job(at.on(""), at.options.job_id, at.options.json);
}

void job_cancel_options(CLI::App& cmd, parsed_options& o) {
  job_id_options(cmd, o);
  cmd.add_option("--wait", o.cancel_wait,
                 "how long to wait for a running job to end (default 10s; "
                 "0: do not wait)");
}

int job_cancel(invocation& at) {
  auto& o = at.options;
  return cancel_job(at.on(""), o.job_id, o.cancel_wait, o.json);
}

int job_retry(invocation& at) {
  return retry_job(at.on(""), at.options.job_id, at.options.json);
}

// -- dead letters -------------------------------------------------------------

void dlq_list_options(CLI::App& cmd, parsed_options& o) {
  cmd.add_option("--limit", o.limit, "at most N rows (default 100)")
    ->check(CLI::Range(int64_t{1}, int64_t{1'000'000}));
  cmd.add_option("--queue", o.dlq_queue, "only this queue");
}

int dlq_list(invocation& at) {
  auto& o = at.options;
  return list_dead_letters(at.on(o.dlq_queue), o.limit, o.dlq_queue, o.json);
}

void dlq_show_options(CLI::App& cmd, parsed_options& o) {
  cmd.add_option("ID", o.dead_id, "dead letter id (as `dlq list` shows it)")
    ->required();
}

int dlq_show(invocation& at) {
  return show_dead_letter(at.on(""), at.options.dead_id, at.options.json);
}

void dlq_retry_options_of(CLI::App& cmd, parsed_options& o) {
  auto& retry = o.dlq_retry;
  cmd.add_option("ID", retry.id, "dead letter id (as `dlq list` shows it)")
    ->check(CLI::PositiveNumber);
  cmd.add_flag("--all", retry.all,
               "every dead letter (of --queue, --kind and --fingerprint)");
  cmd.add_option("--queue", retry.queue, "with --all: only this queue");
  cmd.add_option("--kind", retry.kind, "with --all: only this kind");
  cmd.add_option("--fingerprint", retry.fingerprint,
                 "with --all: only this error fingerprint (a failure group "
                 "of the dashboard)");
  cmd.add_flag("--json", retry.json,
               "a JSON array: dead_letter_id, original_job_id, job_id, "
               "kind, queue");
}

int dlq_retry(invocation& at) {
  auto& retry = at.options.dlq_retry;
  return retry_dead_letters(at.on(retry.queue), retry);
}

void dlq_purge_options(CLI::App& cmd, parsed_options& o) {
  cmd.add_option("--before", o.purge_before,
                 "only those that failed longer than DURATION ago (7d, 12h; "
                 "bare number: seconds)");
  cmd.add_option("--queue", o.dlq_queue, "only this queue");
}

int dlq_purge(invocation& at) {
  auto& o = at.options;
  return purge_dead_letters(at.on(o.dlq_queue), o.purge_before, o.dlq_queue,
                            o.json);
}

// -- callbacks ----------------------------------------------------------------

void callback_options(CLI::App& cmd, parsed_options& o) {
  cmd.add_option("CALLBACK_ID", o.callback_id, "the job's callback_id")
    ->required();
  cmd.add_option("PAYLOAD_JSON", o.callback_payload,
                 "stored in callback_result; @FILE reads it from FILE, - "
                 "from stdin");
}

/// The action is the command's name: complete, fail, retry or resume.
int callback(invocation& at) {
  auto& o = at.options;
  return resolve_callback(at.config(), o.database, at.command.get_name(),
                          o.callback_id, o.callback_payload);
}

} // namespace

// -- the table ----------------------------------------------------------------

const std::vector<command>& command_table() {
  static const std::vector<command> table{
    {"migrate", "apply schema migrations", nullptr, nullptr, migrate, {}},
    {"run", "run a worker until SIGINT/SIGTERM", run_options, nullptr, run,
     {}},
    {"nodes", "list the worker processes of the cluster (alive or dead)",
     nullptr, "a JSON array of objects keyed by column name", nodes, {}},
    {"queues",
     "list every queue: jobs by state, age of the oldest available job, "
     "running per node, paused or not, cluster-wide limits",
     nullptr,
     "a JSON array of objects, one per queue",
     queues,
     {{"pause",
       "pause QUEUE on every node: no new job of it starts; running jobs "
       "finish",
       queue_control_options, nullptr, pause, {}},
      {"resume", "resume QUEUE on every node at once", queue_control_options,
       nullptr, resume, {}}}},
    {"periodic",
     "list the periodic schedules ([periodic.NAME]) with their last and next "
     "run",
     nullptr, "a JSON array of objects (keys in the README)", periodic, {}},
    {"check",
     "validate the config file (every node of a cluster) and print what each "
     "node would run; connects nowhere",
     nullptr, "print a JSON document", check, {}},
    {"enqueue",
     "enqueue one job and print its id (or many from JSON lines: --jsonl)",
     enqueue_options_of, nullptr, enqueue, {}},
    {"jobs",
     "list, inspect, cancel and retry jobs",
     nullptr,
     nullptr,
     nullptr,
     {{"list", "list jobs in id order, a page at a time",
       jobs_list_options_of, nullptr, jobs_list, {}},
      {"show", "print one job's row", job_id_options, "one line of JSON",
       job_show, {}},
      {"cancel",
       "cancel a job: at once if it waits, through its worker if it runs",
       job_cancel_options, "one line of JSON", job_cancel, {}},
      {"retry", "run a job now: a scheduled one at once, a finished one again",
       job_id_options, "one line of JSON", job_retry, {}}}},
    {"dlq",
     "inspect, retry and purge dead letters",
     nullptr,
     nullptr,
     nullptr,
     {{"list", "list dead letters", dlq_list_options, "a JSON array",
       dlq_list, {}},
      {"show", "print one dead letter", dlq_show_options, "one line of JSON",
       dlq_show, {}},
      {"retry",
       "move dead letters back into jobs as fresh jobs (one transaction)",
       dlq_retry_options_of, nullptr, dlq_retry, {}},
      {"purge", "delete dead letters; prints the count", dlq_purge_options,
       "{\"purged\": N}", dlq_purge, {}}}},
    {"callback",
     "resolve a job waiting for an external callback",
     nullptr,
     nullptr,
     nullptr,
     {{"complete", "complete the job", callback_options, nullptr, callback,
       {}},
      {"fail",
       "fail it for good (dead letter queue); the payload's \"error\" is the "
       "message",
       callback_options, nullptr, callback, {}},
      {"retry", "make it available again (event retried)", callback_options,
       nullptr, callback, {}},
      {"resume",
       "make it available again to go on with the payload (no event: its "
       "next run fires started and its outcome)",
       callback_options, nullptr, callback, {}}}},
  };
  return table;
}

} // namespace aw::cli
