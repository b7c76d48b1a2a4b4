// aw-bench-enqueue: bulk enqueue throughput of aw::enqueue_many from one
// client: batches of --batch jobs, one transaction each, until --jobs
// were enqueued. Each job has small args ({"n": i}), like the drain's.
//
//   aw-bench-enqueue --url postgresql://... [--jobs 1000000] [--batch 1000]
//                    [--table NAME]
//
// With --table, the same batches go into table NAME instead, as the
// statement enqueue_many's bulk path sends them (four arrays unnested into
// kind, queue, args, priority, ready_xid; RETURNING id), without the rest
// of enqueue_many: what a row of that table costs, for tables shaped
// differently from job_rows (bench/latency.sh).
//
// Prints `RESULT enqueue_many jobs=.. batch=.. seconds=.. jobs_per_sec=..`,
// or `RESULT enqueue_arrays/NAME ...` with --table.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "actor_worker/storage/enqueue.hpp"

namespace {

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "aw-bench-enqueue: " << why
            << "\nusage: aw-bench-enqueue --url URL [--jobs N] [--batch N] "
               "[--table NAME]\n";
  std::exit(2);
}

} // namespace

int main(int argc, char** argv) {
  std::string url;
  std::string table;
  long jobs = 1'000'000;
  long batch = 1000;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc)
      usage("missing value after " + flag);
    std::string value = argv[++i];
    char* end = nullptr;
    long n = std::strtol(value.c_str(), &end, 10);
    bool numeric = !value.empty() && *end == '\0' && n > 0;
    if (flag == "--url")
      url = value;
    else if (flag == "--table" && !value.empty())
      table = value;
    else if (flag == "--jobs" && numeric)
      jobs = n;
    else if (flag == "--batch" && numeric)
      batch = n;
    else if (flag == "--jobs" || flag == "--batch")
      usage(flag + " takes a positive integer, not '" + value + "'");
    else
      usage("unknown flag " + flag);
  }
  if (url.empty())
    usage("--url is required");
  try {
    pqxx::connection conn{url};
    std::vector<aw::enqueue_request> requests(static_cast<size_t>(batch));
    for (auto& r : requests)
      r.kind = "noop";
    // --table: enqueue_plain.sql's statement, into another table.
    std::string statement;
    if (!table.empty())
      statement = "INSERT INTO " + conn.quote_name(table)
                  + " (kind, queue, args, priority, ready_xid)"
                    " SELECT u.kind, u.queue, u.args, u.priority,"
                    " pg_current_xact_id()"
                    " FROM unnest($1::text[], $2::text[], $3::jsonb[],"
                    " $4::integer[]) AS u(kind, queue, args, priority)"
                    " RETURNING id";
    auto t0 = std::chrono::steady_clock::now();
    long done = 0;
    while (done < jobs) {
      auto n = std::min(batch, jobs - done);
      size_t returned = 0;
      pqxx::work tx{conn};
      if (statement.empty()) {
        requests.resize(static_cast<size_t>(n));
        for (long k = 0; k < n; ++k)
          requests[static_cast<size_t>(k)].args = nlohmann::json{{"n", done + k}};
        returned = aw::enqueue_many(tx, requests).size();
      } else {
        std::string kinds = "{", queues = "{", args = "{", priorities = "{";
        for (long k = 0; k < n; ++k) {
          const char* sep = k > 0 ? "," : "";
          kinds += std::string{sep} + "\"noop\"";
          queues += std::string{sep} + "\"default\"";
          args += std::string{sep} + "\"{\\\"n\\\": " + std::to_string(done + k)
                  + "}\"";
          priorities += std::string{sep} + "0";
        }
        kinds += '}';
        queues += '}';
        args += '}';
        priorities += '}';
        returned = tx.exec_params(statement, kinds, queues, args, priorities).size();
      }
      tx.commit();
      if (returned != static_cast<size_t>(n)) {
        std::cerr << "aw-bench-enqueue: a batch of " << n << " returned "
                  << returned << " ids\n";
        return 1;
      }
      done += n;
    }
    double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - t0)
                       .count();
    std::printf("RESULT %s jobs=%ld batch=%ld seconds=%.3f jobs_per_sec=%.0f\n",
                table.empty() ? "enqueue_many"
                              : ("enqueue_arrays/" + table).c_str(),
                done, batch, seconds, static_cast<double>(done) / seconds);
  } catch (const std::exception& e) {
    std::cerr << "aw-bench-enqueue: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
