// aw-bench-enqueue: bulk enqueue throughput of aw::enqueue_many from one
// client: batches of --batch jobs, one transaction each, until --jobs
// were enqueued. Each job has small args ({"n": i}), like the drain's.
//
//   aw-bench-enqueue --url postgresql://... [--jobs 1000000] [--batch 1000]
//                    [--layout rows|packed] [--table NAME]
//
// --layout packed: enqueue_many with aw::bulk_layout::packed (one pack per
// batch) instead of a row per job.
//
// With --table, the same batches go into table NAME instead, as the
// statement enqueue_many's bulk path sends them (four arrays unnested into
// kind, queue, args, priority, ready_xid; RETURNING id), without the rest
// of enqueue_many: what a row of that table costs, for tables shaped
// differently from job_rows (bench/latency.sh).
//
// With --packs NAME, each batch goes into table NAME as one row (a "pack":
// queue, priority, ready_xid, the jobs' ids, and their kinds and args as
// two arrays), the layout bench/results/2026-12-02-packed-enqueue.md
// measures. --ids says where the ids come from: "block" (one nextval of
// NAME_blocks, a sequence that hands out blocks of 1024 ids: the pack
// stores its first id) or "per_job" (one nextval of NAME_ids per job, the
// pack stores them as an array).
//
// Prints `RESULT enqueue_many jobs=.. batch=.. seconds=.. jobs_per_sec=..`,
// or `RESULT enqueue_arrays/NAME ...` with --table, or
// `RESULT enqueue_packed/NAME/IDS ...` with --packs.

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
               "[--layout rows|packed] [--table NAME | --packs NAME "
               "[--ids block|per_job]]\n";
  std::exit(2);
}

} // namespace

int main(int argc, char** argv) {
  std::string url;
  std::string table;
  std::string packs;
  std::string ids = "block";
  auto layout = aw::bulk_layout::rows;
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
    else if (flag == "--packs" && !value.empty())
      packs = value;
    else if (flag == "--ids" && (value == "block" || value == "per_job"))
      ids = value;
    else if (flag == "--layout" && (value == "rows" || value == "packed"))
      layout = value == "rows" ? aw::bulk_layout::rows : aw::bulk_layout::packed;
    else if (flag == "--layout")
      usage("--layout takes rows or packed, not '" + value + "'");
    else if (flag == "--ids")
      usage("--ids takes block or per_job, not '" + value + "'");
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
  if (!table.empty() && !packs.empty())
    usage("--table and --packs exclude each other");
  if (batch > 1024 && !packs.empty())
    usage("--packs takes batches of at most 1024 jobs (one id block)");
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
    // --packs: the batch as one row.
    if (!packs.empty()) {
      auto name = conn.quote_name(packs);
      auto ids_of_batch =
        ids == "block"
          ? "nextval(" + conn.quote(packs + "_blocks") + "), NULL::bigint[]"
          : "NULL::bigint, ARRAY(SELECT nextval(" + conn.quote(packs + "_ids")
              + ") FROM generate_series(1, $4))";
      statement = "INSERT INTO " + name
                  + " (queue, priority, ready_xid, first_id, ids, n, kinds, args)"
                    " SELECT $1, $2, pg_current_xact_id(), "
                  + ids_of_batch
                  + ", $4, $3::text[], $5::jsonb[]"
                    " RETURNING coalesce(first_id, ids[1]) AS id, n";
    }
    auto t0 = std::chrono::steady_clock::now();
    long done = 0;
    while (done < jobs) {
      auto n = std::min(batch, jobs - done);
      size_t returned = 0;
      pqxx::work tx{conn};
      if (!packs.empty()) {
        std::string kinds = "{", args = "{";
        for (long k = 0; k < n; ++k) {
          const char* sep = k > 0 ? "," : "";
          kinds += std::string{sep} + "\"noop\"";
          args += std::string{sep} + "\"{\\\"n\\\": " + std::to_string(done + k)
                  + "}\"";
        }
        kinds += '}';
        args += '}';
        auto row = tx.exec_params1(statement, "default", 0, kinds,
                                   static_cast<int>(n), args);
        returned = static_cast<size_t>(row["n"].as<long>());
      } else if (statement.empty()) {
        requests.resize(static_cast<size_t>(n));
        for (long k = 0; k < n; ++k)
          requests[static_cast<size_t>(k)].args = nlohmann::json{{"n", done + k}};
        returned = aw::enqueue_many(tx, requests, layout).size();
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
                !packs.empty() ? ("enqueue_packed/" + packs + "/" + ids).c_str()
                : table.empty() ? (layout == aw::bulk_layout::packed
                                     ? "enqueue_many/packed" : "enqueue_many")
                                : ("enqueue_arrays/" + table).c_str(),
                done, batch, seconds, static_cast<double>(done) / seconds);
  } catch (const std::exception& e) {
    std::cerr << "aw-bench-enqueue: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
