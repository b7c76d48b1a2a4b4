// aw-bench-enqueue: bulk enqueue throughput from one client: batches of
// --batch jobs, one transaction each, until --jobs were enqueued. Each job
// has small args ({"n": i}), like the drain's.
//
//   aw-bench-enqueue --url postgresql://... [--jobs 1000000] [--batch 1000]
//                    [--way api|copy|insert]
//
//   api     aw::enqueue_many (ids returned; COPY from copy_threshold plain
//           jobs on, one INSERT of column arrays below it)
//   copy    COPY jobs_in (kind, args) FROM STDIN through pqxx::stream_to, as
//           any client library bulk-loads (no ids returned)
//   insert  one INSERT INTO jobs_in (kind, args) SELECT ... FROM unnest(...)
//           per batch, RETURNING id
//
// Prints `RESULT enqueue/WAY jobs=.. batch=.. seconds=.. jobs_per_sec=..`.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include <pqxx/pqxx>

#include "actor_worker/storage/enqueue.hpp"

namespace {

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "aw-bench-enqueue: " << why
            << "\nusage: aw-bench-enqueue --url URL [--jobs N] [--batch N] "
               "[--way api|copy|insert]\n";
  std::exit(2);
}

} // namespace

int main(int argc, char** argv) {
  std::string url;
  std::string way = "api";
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
    else if (flag == "--way" && (value == "api" || value == "copy" || value == "insert"))
      way = value;
    else if (flag == "--way")
      usage("--way takes api, copy or insert, not '" + value + "'");
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
    auto t0 = std::chrono::steady_clock::now();
    long done = 0;
    while (done < jobs) {
      auto n = std::min(batch, jobs - done);
      pqxx::work tx{conn};
      if (way == "api") {
        requests.resize(static_cast<size_t>(n));
        for (long k = 0; k < n; ++k)
          requests[static_cast<size_t>(k)].args = nlohmann::json{{"n", done + k}};
        if (aw::enqueue_many(tx, requests).size() != static_cast<size_t>(n))
          throw std::runtime_error("enqueue_many returned too few ids");
      } else if (way == "copy") {
        pqxx::stream_to copy(tx, "jobs_in", std::vector<std::string>{"kind", "args"});
        for (long k = 0; k < n; ++k)
          copy << std::make_tuple(std::string{"noop"},
                                  "{\"n\": " + std::to_string(done + k) + "}");
        copy.complete();
      } else {
        std::string kinds = "{", args = "{";
        for (long k = 0; k < n; ++k) {
          const char* sep = k > 0 ? "," : "";
          kinds += std::string{sep} + "\"noop\"";
          args += std::string{sep} + "\"{\\\"n\\\": " + std::to_string(done + k)
                  + "}\"";
        }
        kinds += '}';
        args += '}';
        auto r = tx.exec_params("INSERT INTO jobs_in (kind, args) SELECT u.kind, u.args "
                                "FROM unnest($1::text[], $2::jsonb[]) AS u(kind, args) "
                                "RETURNING id",
                                kinds, args);
        if (r.size() != static_cast<size_t>(n))
          throw std::runtime_error("the INSERT returned too few ids");
      }
      tx.commit();
      done += n;
    }
    double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - t0)
                       .count();
    std::printf("RESULT enqueue/%s jobs=%ld batch=%ld seconds=%.3f jobs_per_sec=%.0f\n",
                way.c_str(), done, batch, seconds,
                static_cast<double>(done) / seconds);
  } catch (const std::exception& e) {
    std::cerr << "aw-bench-enqueue: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
