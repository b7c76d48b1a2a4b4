// sql_schedules: random multi-session schedules against the real SQL
// (issue 48, part 3). See docs/delivery.md#sql-schedules.
//
//   sql_schedules [--seeds N] [--seed S] [--steps K] [--verbose]
//                 [--expect-caught]
//
// The server is DATABASE_URL, else AW_TEST_DATABASE_URL; the program
// creates a database of its own there, migrates it, applies
// AW_SIM_MUTATION (mutations.hpp) if set, runs seeds S .. S+N-1 and drops
// the database. The last line says "N seeds, V violations"; the exit
// status is non-zero on any violation. --expect-caught (with a mutation)
// inverts that: it stops at the first violation and succeeds when it is
// the invariant the mutation must break.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

#include <pqxx/pqxx>

#include "actor_worker/storage/migrations.hpp"

#include "mutations.hpp"
#include "schedule.hpp"

namespace {

std::string with_database(const std::string& url, const std::string& db) {
  auto q = url.find('?');
  auto base = url.substr(0, q);
  auto rest = q == std::string::npos ? std::string{} : url.substr(q);
  auto slash = base.rfind('/');
  if (slash == std::string::npos || slash < base.find("//") + 2)
    return base + "/" + db + rest;
  return base.substr(0, slash + 1) + db + rest;
}

int usage() {
  std::fprintf(stderr, "usage: sql_schedules [--seeds N] [--seed S] "
                       "[--steps K] [--verbose] [--expect-caught]\n");
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  using namespace aw::sim::sql;
  long seeds = 1;
  unsigned long long first = 1;
  int steps = 60;
  bool verbose = false;
  bool expect_caught = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--seeds")
        seeds = std::stol(value());
      else if (a == "--seed")
        first = std::stoull(value());
      else if (a == "--steps")
        steps = std::stoi(value());
      else if (a == "--verbose")
        verbose = true;
      else if (a == "--expect-caught")
        expect_caught = true;
      else
        return usage();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sql_schedules: %s\n", e.what());
      return usage();
    }
  }
  const char* server = std::getenv("DATABASE_URL");
  if (server == nullptr || *server == '\0')
    server = std::getenv("AW_TEST_DATABASE_URL");
  if (server == nullptr || *server == '\0') {
    std::fprintf(stderr, "sql_schedules: set DATABASE_URL (a server where it "
                         "may create a database)\n");
    return 2;
  }
  const char* mutation_name = std::getenv("AW_SIM_MUTATION");
  const mutation* m = nullptr;
  try {
    if (mutation_name != nullptr && *mutation_name != '\0')
      m = &find_mutation(mutation_name);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sql_schedules: %s\n", e.what());
    return 2;
  }
  if (expect_caught && m == nullptr) {
    std::fprintf(stderr, "sql_schedules: --expect-caught needs AW_SIM_MUTATION\n");
    return 2;
  }
  auto db = "aw_sqlsim_" + std::to_string(::getpid());
  auto url = with_database(server, db);
  long ran = 0;
  long violations = 0;
  int status = 0;
  try {
    {
      pqxx::connection admin{server};
      pqxx::nontransaction q(admin);
      q.exec("DROP DATABASE IF EXISTS " + admin.quote_name(db));
      q.exec("CREATE DATABASE " + admin.quote_name(db));
      // No wait for WAL flushes: the schedules never crash the server, and
      // a commit's fsync was most of a step's time.
      q.exec("ALTER DATABASE " + admin.quote_name(db)
             + " SET synchronous_commit = off");
    }
    aw::storage::migrate(url);
    if (m != nullptr) {
      pqxx::connection conn{url};
      auto file = apply_mutation(conn, *m);
      std::printf("mutation %s: %s patched in %s\n", m->name.c_str(),
                  m->function.c_str(), file.c_str());
    }
    auto began = std::chrono::steady_clock::now();
    long blocked = 0;
    long transient = 0;
    long kills = 0;
    long jobs = 0;
    long unmirrored = 0;
    double check_ms = 0;
    bool caught = false;
    runner schedules{url};
    for (long i = 0; i < seeds; ++i) {
      schedule_options o;
      o.url = url;
      o.seed = first + static_cast<unsigned long long>(i);
      o.steps = steps;
      o.verbose = verbose;
      auto r = schedules.run(o);
      ++ran;
      blocked += r.blocked_steps;
      transient += r.transient_waits;
      unmirrored += r.unmirrored;
      kills += r.kills;
      jobs += r.jobs;
      check_ms += r.check_ms;
      if (r.violations.empty())
        continue;
      violations += static_cast<long>(r.violations.size());
      auto& v = r.violations.front();
      auto seed = static_cast<unsigned long long>(o.seed);
      std::printf("seed %llu: %s at step %d: %s\n", seed,
                  v.invariant.c_str(), v.step, v.detail.c_str());
      if (!verbose) {
        // The trace's tail: enough to read it; --seed S --verbose replays.
        size_t from = r.trace.size() > 25 ? r.trace.size() - 25 : 0;
        for (size_t k = from; k < r.trace.size(); ++k)
          std::printf("  %s\n", r.trace[k].c_str());
      }
      std::printf("replay: %sscripts/simulate.sh --sql --seed %llu --seeds 1 "
                  "--verbose\n",
                  m != nullptr ? ("AW_SIM_MUTATION=" + m->name + " ").c_str() : "",
                  seed);
      if (expect_caught) {
        caught = v.invariant == m->caught_as;
        std::printf("mutation %s caught at seed %llu as %s (expected %s)\n",
                    m->name.c_str(), seed, v.invariant.c_str(),
                    m->caught_as.c_str());
        break;
      }
    }
    double secs = std::chrono::duration<double>(
                    std::chrono::steady_clock::now() - began)
                    .count();
    std::printf("%.2f schedules/s (%.0f%% of the time in checks), %ld steps "
                "waited on a lock (and %ld for a lock of a transaction ending "
                "by itself), %ld sessions killed, %ld jobs; the model "
                "followed %ld of %ld schedules to their end\n",
                secs > 0 ? ran / secs : 0.0,
                secs > 0 ? check_ms / 10 / secs : 0.0, blocked, transient,
                kills, jobs, ran - unmirrored, ran);
    if (expect_caught && !caught) {
      std::printf("mutation %s was not caught as %s\n", m->name.c_str(),
                  m->caught_as.c_str());
      status = 1;
    } else if (!expect_caught && violations > 0) {
      status = 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sql_schedules: %s\n", e.what());
    status = 2;
  }
  try {
    pqxx::connection admin{server};
    pqxx::nontransaction q(admin);
    q.exec("DROP DATABASE IF EXISTS " + admin.quote_name(db)
           + " WITH (FORCE)");
  } catch (const std::exception&) {
    // A database left behind is only litter on a throwaway server.
  }
  std::printf("%ld seeds, %ld violations\n", ran, violations);
  return status;
}
