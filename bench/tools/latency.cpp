// aw-bench-latency: pickup latency of an embedded worker with idle
// capacity. Producers enqueue one job per transaction at a fixed rate (500
// per second by default); the handler notes when it starts. Latency is
// handler start minus the moment the producer's COMMIT returned (the job
// cannot be claimed before its commit, and the client learns of the commit
// no earlier than then), reported as p50/p95/p99/max over the jobs after
// the warm-up.
//
//   aw-bench-latency --url postgresql://... [--rate 500] [--seconds 20]
//                    [--warmup 2] [--concurrency 10] [--producers 2]
//
// The database must be migrated and its `default` queue empty. Prints
// `#` lines and `RESULT latency jobs=.. p50_ms=.. p95_ms=.. p99_ms=..
// max_ms=..`; exits 1 if a job did not start within 10 s of the last
// enqueue. With AW_BENCH_INFO set in the environment the worker logs at
// info level (its claim round trips, every 10 s), to see where the time
// goes.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "actor_worker/app/registry.hpp"
#include "actor_worker/app/runtime.hpp"
#include "actor_worker/storage/enqueue.hpp"

namespace {

using steady = std::chrono::steady_clock;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           steady::now().time_since_epoch())
    .count();
}

struct options {
  std::string url;
  int rate = 500;
  int seconds = 20;
  int warmup = 2;
  int concurrency = 10;
  int producers = 2;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "aw-bench-latency: " << why
            << "\nusage: aw-bench-latency --url URL [--rate N] [--seconds N] "
               "[--warmup N] [--concurrency N] [--producers N]\n";
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc)
      usage("missing value after " + flag);
    std::string value = argv[++i];
    auto number = [&] {
      try {
        size_t used = 0;
        int n = std::stoi(value, &used);
        if (used != value.size() || n < 0)
          throw std::invalid_argument(value);
        return n;
      } catch (const std::exception&) {
        usage(flag + " takes a non-negative integer, not '" + value + "'");
      }
    };
    if (flag == "--url")
      o.url = value;
    else if (flag == "--rate")
      o.rate = number();
    else if (flag == "--seconds")
      o.seconds = number();
    else if (flag == "--warmup")
      o.warmup = number();
    else if (flag == "--concurrency")
      o.concurrency = number();
    else if (flag == "--producers")
      o.producers = number();
    else
      usage("unknown flag " + flag);
  }
  if (o.url.empty())
    usage("--url is required");
  if (o.rate < 1 || o.seconds < 1 || o.concurrency < 1 || o.producers < 1)
    usage("--rate, --seconds, --concurrency and --producers must be >= 1");
  return o;
}

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty())
    return 0;
  auto rank = static_cast<size_t>(p / 100.0 * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(rank, sorted.size() - 1)];
}

} // namespace

int main(int argc, char** argv) {
  auto opt = parse(argc, argv);
  spdlog::set_level(std::getenv("AW_BENCH_INFO") ? spdlog::level::info : spdlog::level::warn);
  const size_t total = static_cast<size_t>(opt.rate) * static_cast<size_t>(opt.seconds);
  std::vector<std::atomic<int64_t>> started(total);
  std::vector<int64_t> committed(total, 0);
  for (auto& s : started)
    s.store(0);

  auto reg = std::make_shared<aw::registry>();
  reg->add_raw(
    "latency_probe",
    [&started, total](const nlohmann::json& args, const aw::job_context&) {
      auto seq = args.at("seq").get<size_t>();
      if (seq < total)
        started[seq].store(now_ns());
    },
    aw::non_blocking);

  aw::runtime_config cfg;
  cfg.database.url = opt.url;
  aw::queue_config q;
  q.concurrency = opt.concurrency;
  cfg.queues = {q};
  cfg.validate();
  caf::actor_system_config sys_cfg;
  aw::configure_actor_system(sys_cfg, cfg.scheduler);
  caf::actor_system sys{sys_cfg};
  aw::runtime rt{sys, cfg, reg};
  // Let the node start (schema check, LISTEN) before the clock runs.
  std::this_thread::sleep_for(std::chrono::seconds(1));

  std::atomic<bool> failed{false};
  auto start = steady::now() + std::chrono::milliseconds(100);
  auto period = std::chrono::nanoseconds(1'000'000'000LL / opt.rate);
  std::vector<std::thread> producers;
  for (int p = 0; p < opt.producers; ++p)
    producers.emplace_back([&, p] {
      try {
        pqxx::connection conn{opt.url};
        for (size_t i = static_cast<size_t>(p); i < total;
             i += static_cast<size_t>(opt.producers)) {
          std::this_thread::sleep_until(start + period * static_cast<int64_t>(i));
          pqxx::work tx{conn};
          aw::enqueue(tx, "latency_probe", nlohmann::json{{"seq", i}});
          tx.commit();
          committed[i] = now_ns();
        }
      } catch (const std::exception& e) {
        std::cerr << "aw-bench-latency: producer " << p << ": " << e.what() << "\n";
        failed = true;
      }
    });
  for (auto& t : producers)
    t.join();
  auto enqueue_end = steady::now();
  auto behind = std::chrono::duration<double>(enqueue_end - (start + period * static_cast<int64_t>(total)));
  bool all = false;
  while (steady::now() - enqueue_end < std::chrono::seconds(10)) {
    all = std::all_of(started.begin(), started.end(),
                      [](const std::atomic<int64_t>& s) { return s.load() != 0; });
    if (all)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  rt.stop();
  if (failed)
    return 1;

  size_t skip = std::min(total, static_cast<size_t>(opt.rate) * static_cast<size_t>(opt.warmup));
  std::vector<double> ms;
  size_t missing = 0;
  size_t before_ack = 0;
  for (size_t i = skip; i < total; ++i) {
    auto s = started[i].load();
    if (s == 0) {
      ++missing;
      continue;
    }
    auto d = static_cast<double>(s - committed[i]) / 1e6;
    if (d < 0) {
      ++before_ack; // started while the COMMIT's answer was on its way
      d = 0;
    }
    ms.push_back(d);
  }
  std::sort(ms.begin(), ms.end());
  std::printf("# latency: %zu single-job transactions at %d/s from %d producer(s) "
              "(last enqueue %.3f s behind schedule), concurrency %d; %zu "
              "warm-up jobs not counted; %zu started before their producer saw "
              "the commit (counted as 0)\n",
              total, opt.rate, opt.producers, behind.count(), opt.concurrency,
              skip, before_ack);
  std::printf("RESULT latency jobs=%zu p50_ms=%.2f p95_ms=%.2f p99_ms=%.2f max_ms=%.2f\n",
              ms.size(), percentile(ms, 50), percentile(ms, 95),
              percentile(ms, 99), ms.empty() ? 0.0 : ms.back());
  if (!all || missing > 0) {
    std::fprintf(stderr, "aw-bench-latency: %zu job(s) never started\n", missing);
    return 1;
  }
  return 0;
}
