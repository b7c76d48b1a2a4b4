#include "actor_worker/app/http_handler.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <ctime>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include <curl/curl.h>

#include "actor_worker/app/job_protocol.hpp"
#include "actor_worker/config/seconds.hpp"

namespace aw {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string trim(const std::string& s) {
  auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos)
    return {};
  auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

/// A Retry-After value: delay-seconds or an HTTP date; nothing when
/// neither.
std::optional<std::chrono::milliseconds>
parse_retry_after(const std::string& text) {
  auto v = trim(text);
  if (v.empty())
    return std::nullopt;
  if (std::all_of(v.begin(), v.end(),
                  [](unsigned char c) { return std::isdigit(c); })) {
    auto max_s = whole_seconds(defaults::max_duration);
    if (v.size() > 12)
      return defaults::max_duration;
    return std::chrono::milliseconds{std::min<int64_t>(std::stoll(v), max_s)
                                     * 1000};
  }
  auto at = ::curl_getdate(v.c_str(), nullptr);
  if (at == -1)
    return std::nullopt;
  auto seconds = std::max<int64_t>(0, static_cast<int64_t>(at - std::time(nullptr)));
  return std::chrono::milliseconds{
    std::min<int64_t>(seconds * 1000, defaults::max_duration.count())};
}

/// `text` with every secret replaced by "[redacted]".
std::string mask(std::string text, const std::vector<std::string>& secrets) {
  for (auto& s : secrets)
    for (auto pos = text.find(s); pos != std::string::npos;
         pos = text.find(s, pos))
      text.replace(pos, s.size(), "[redacted]");
  return text;
}

/// `text` (cut short: what follows is not shown) with what the cut left of
/// a secret at its end masked: a secret's first 4 or more bytes.
std::string mask_cut(std::string text, const std::vector<std::string>& secrets) {
  constexpr size_t shortest = 4;
  for (auto& s : secrets)
    for (size_t n = std::min(text.size(), s.size() - 1); n >= shortest; --n)
      if (text.compare(text.size() - n, n, s, 0, n) == 0) {
        text.replace(text.size() - n, n, "[redacted]");
        return text;
      }
  return text;
}

/// What may not appear in messages: each header value, and each of its
/// words long enough to be a token ("Bearer abc..." echoed as "abc...").
std::vector<std::string> secrets_of(const http_kind_config& kind) {
  std::vector<std::string> out;
  for (auto& header : kind.headers) {
    auto& value = header.value;
    if (value.size() >= 4)
      out.push_back(value);
    size_t pos = 0;
    while (pos < value.size()) {
      auto start = value.find_first_not_of(" \t", pos);
      if (start == std::string::npos)
        break;
      auto end = value.find_first_of(" \t", start);
      if (end == std::string::npos)
        end = value.size();
      if (end - start >= 6 && end - start < value.size())
        out.push_back(value.substr(start, end - start));
      pos = end;
    }
  }
  // Longest first, so a value is masked whole before its words are.
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) {
    return a.size() > b.size();
  });
  return out;
}

} // namespace

struct http_client::kind {
  http_kind_config cfg;
  /// The URL as messages quote it.
  std::string where;
  /// What messages never show (see secrets_of).
  std::vector<std::string> secrets;
  /// The configuration sets Content-Type itself.
  bool has_content_type = false;
};

std::shared_ptr<const http_client::kind>
http_client::prepare(http_kind_config cfg) {
  auto k = std::make_shared<kind>();
  k->where = redacted_url(cfg.url);
  k->secrets = secrets_of(cfg);
  for (auto& h : cfg.headers)
    k->has_content_type = k->has_content_type
                          || lower(h.name) == "content-type";
  k->cfg = std::move(cfg);
  return k;
}

std::string redacted_url(const std::string& url) {
  auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos)
    return "(the configured URL)";
  auto authority_start = scheme_end + 3;
  auto authority_end = url.find_first_of("/?#", authority_start);
  if (authority_end == std::string::npos)
    authority_end = url.size();
  auto authority = url.substr(authority_start, authority_end - authority_start);
  if (auto at = authority.rfind('@'); at != std::string::npos)
    authority = authority.substr(at + 1);
  auto path_end = url.find_first_of("?#", authority_end);
  if (path_end == std::string::npos)
    path_end = url.size();
  return url.substr(0, authority_start) + authority
         + url.substr(authority_end, path_end - authority_end);
}

struct http_client::impl {
  /// One request in flight.
  struct transfer {
    transfer(uint64_t id, int64_t job_id,
             std::shared_ptr<const http_client::kind> kind, std::string body,
             job_promise done, std::string callback_id)
      : id(id), job_id(job_id), kind(std::move(kind)), body(std::move(body)),
        done(std::move(done)), callback_id(std::move(callback_id)) {
      errbuf[0] = '\0';
    }

    ~transfer() {
      if (easy)
        ::curl_easy_cleanup(easy);
      if (headers)
        ::curl_slist_free_all(headers);
    }

    uint64_t id;
    int64_t job_id;
    std::shared_ptr<const http_client::kind> kind;
    std::string body;
    job_promise done;
    /// The run's callback id (X-AW-Callback-Id), registered before it
    /// started; empty if none.
    std::string callback_id;
    CURL* easy = nullptr;
    curl_slist* headers = nullptr;
    std::string response;
    bool response_cut = false;
    std::string retry_after;
    char errbuf[CURL_ERROR_SIZE];
  };

  impl() {
    static std::once_flag once;
    std::call_once(once, [] { ::curl_global_init(CURL_GLOBAL_DEFAULT); });
    multi = ::curl_multi_init();
    if (!multi)
      throw std::runtime_error("http client: curl_multi_init failed");
  }

  ~impl() {
    transfers.clear();
    ::curl_multi_cleanup(multi);
  }

  /// Runs `fn` on the client's thread.
  void post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> guard{mtx};
      inbox.push_back(std::move(fn));
    }
    ::curl_multi_wakeup(multi);
  }

  void loop() {
    for (;;) {
      std::vector<std::function<void()>> work;
      {
        std::lock_guard<std::mutex> guard{mtx};
        work.swap(inbox);
      }
      for (auto& fn : work)
        fn();
      if (stopping) {
        for (auto& [id, t] : transfers) {
          ::curl_multi_remove_handle(multi, t->easy);
          t->done.fail("the worker stopped before the HTTP request ended");
        }
        transfers.clear();
        count.store(0);
        return;
      }
      int running = 0;
      ::curl_multi_perform(multi, &running);
      int left = 0;
      while (CURLMsg* m = ::curl_multi_info_read(multi, &left)) {
        if (m->msg != CURLMSG_DONE)
          continue;
        transfer* t = nullptr;
        ::curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &t);
        auto result = m->data.result;
        ::curl_multi_remove_handle(multi, m->easy_handle);
        if (t) {
          complete(*t, result);
          transfers.erase(t->id);
          count.store(transfers.size());
        }
      }
      ::curl_multi_poll(multi, nullptr, 0, 1000, nullptr);
    }
  }

  static size_t on_body(char* data, size_t size, size_t n, void* user) {
    auto& t = *static_cast<transfer*>(user);
    auto bytes = size * n;
    auto room = defaults::http_max_response - std::min(defaults::http_max_response,
                                                       t.response.size());
    if (bytes > room)
      t.response_cut = true;
    t.response.append(data, std::min(bytes, room));
    return bytes; // read on, drop the rest
  }

  static size_t on_header(char* data, size_t size, size_t n, void* user) {
    auto& t = *static_cast<transfer*>(user);
    auto bytes = size * n;
    std::string line{data, bytes};
    if (line.rfind("HTTP/", 0) == 0) {
      t.retry_after.clear(); // a new response (after a 100 Continue)
    } else if (auto colon = line.find(':'); colon != std::string::npos
               && lower(trim(line.substr(0, colon))) == "retry-after") {
      t.retry_after = trim(line.substr(colon + 1));
    }
    return bytes;
  }

  void start(std::shared_ptr<transfer> t) {
    if (stopping) {
      t->done.fail("the worker is stopping");
      return;
    }
    auto& k = *t->kind;
    auto e = ::curl_easy_init();
    if (!e) {
      t->done.fail("cannot start an HTTP request (curl_easy_init failed)");
      return;
    }
    t->easy = e;
    if (!k.has_content_type)
      t->headers = ::curl_slist_append(t->headers,
                                       "Content-Type: application/json");
    // No "Expect: 100-continue" round trip for large bodies.
    t->headers = ::curl_slist_append(t->headers, "Expect:");
    if (!t->callback_id.empty())
      t->headers = ::curl_slist_append(
        t->headers, ("X-AW-Callback-Id: " + t->callback_id).c_str());
    for (auto& h : k.cfg.headers)
      t->headers = ::curl_slist_append(
        t->headers,
        (h.name + (h.value.empty() ? ";" : ": " + h.value)).c_str());
    ::curl_easy_setopt(e, CURLOPT_URL, k.cfg.url.c_str());
    ::curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    ::curl_easy_setopt(e, CURLOPT_POST, 1L);
    ::curl_easy_setopt(e, CURLOPT_POSTFIELDS, t->body.data());
    ::curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(t->body.size()));
    ::curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
    ::curl_easy_setopt(e, CURLOPT_USERAGENT, "actor-worker");
    ::curl_easy_setopt(e, CURLOPT_TIMEOUT_MS,
                       static_cast<long>(k.cfg.timeout.count()));
    ::curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    ::curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &impl::on_body);
    ::curl_easy_setopt(e, CURLOPT_WRITEDATA, t.get());
    ::curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &impl::on_header);
    ::curl_easy_setopt(e, CURLOPT_HEADERDATA, t.get());
    ::curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->errbuf);
    ::curl_easy_setopt(e, CURLOPT_PRIVATE, t.get());
    if (::curl_multi_add_handle(multi, e) != CURLM_OK) {
      t->done.fail("cannot start an HTTP request (curl_multi_add_handle "
                   "failed)");
      return;
    }
    transfers.emplace(t->id, std::move(t));
    count.store(transfers.size());
  }

  void cancel(uint64_t id, const std::string& why) {
    auto it = transfers.find(id);
    if (it == transfers.end())
      return;
    auto& t = *it->second;
    ::curl_multi_remove_handle(multi, t.easy);
    t.done.fail("cancelled (" + why + "): the HTTP request to "
                + t.kind->where + " was aborted");
    transfers.erase(it);
    count.store(transfers.size());
  }

  void complete(transfer& t, CURLcode result) {
    auto& k = *t.kind;
    auto& done = t.done;
    if (result != CURLE_OK) {
      if (result == CURLE_OPERATION_TIMEDOUT) {
        done.fail("the HTTP request to " + k.where + " timed out after "
                  + format_duration(k.cfg.timeout));
        return;
      }
      std::string detail = t.errbuf[0] ? t.errbuf : ::curl_easy_strerror(result);
      done.fail(mask("the HTTP request to " + k.where + " failed: " + detail,
                     k.secrets));
      return;
    }
    long status = 0;
    ::curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 200 && status < 300) {
      std::optional<nlohmann::json> object;
      if (!t.response_cut)
        object = outcome_object(t.response);
      if (object)
        finish_with_outcome_object(done, *object);
      else
        done.complete();
      return;
    }
    // Masked before it is cut: a secret the cut splits would escape the
    // mask (and what the cut leaves of one is masked too).
    auto body = mask(t.response, k.secrets);
    if (t.response_cut)
      body = mask_cut(std::move(body), k.secrets);
    bool cut = body.size() > defaults::http_error_excerpt;
    auto excerpt = body.substr(0, std::min(body.size(), defaults::http_error_excerpt));
    if (cut)
      excerpt = mask_cut(std::move(excerpt), k.secrets);
    excerpt = trim(excerpt);
    auto message = mask("HTTP " + std::to_string(status) + " from " + k.where
                          + (excerpt.empty() ? "" : ": " + excerpt)
                          + (cut && !excerpt.empty() ? " [...]" : ""),
                        k.secrets);
    if (status == 429 || status == 503) {
      if (auto delay = parse_retry_after(t.retry_after)) {
        // Capped: a Retry-After of a century would park the job for one.
        auto note = " (Retry-After: " + format_duration(*delay);
        if (*delay > k.cfg.max_retry_after) {
          delay = k.cfg.max_retry_after;
          note += ", capped at max_retry_after " + format_duration(*delay);
        }
        done.finish(outcome::retry_after(*delay, message + note + ")"));
        return;
      }
      done.fail(message);
    } else if (status >= 400 && status < 500) {
      done.fail_terminal(message);
    } else if (status >= 500) {
      done.fail(message);
    } else {
      done.fail_terminal(message + " (an unexpected status; redirects are "
                                   "not followed)");
    }
  }

  CURLM* multi = nullptr;
  std::mutex mtx;
  std::vector<std::function<void()>> inbox;
  bool stopping = false;
  uint64_t next_id = 0;
  std::atomic<size_t> count{0};
  std::unordered_map<uint64_t, std::shared_ptr<transfer>> transfers;
  std::thread thread;
};

http_client::http_client() : impl_(std::make_shared<impl>()) {
  impl_->thread = std::thread{[i = impl_.get()] { i->loop(); }};
}

http_client::~http_client() {
  impl_->post([i = impl_.get()] { i->stopping = true; });
  impl_->thread.join();
}

void http_client::start(std::shared_ptr<const kind> k, int64_t job_id,
                        std::string body, job_promise done,
                        const cancellation_token& cancel,
                        std::string callback_id) {
  // The id is taken here so the cancel callback can name the transfer;
  // the client's thread runs this start before any cancel posted after it.
  uint64_t id;
  {
    std::lock_guard<std::mutex> guard{impl_->mtx};
    id = ++impl_->next_id;
  }
  auto t = std::make_shared<impl::transfer>(id, job_id, std::move(k),
                                            std::move(body), std::move(done),
                                            std::move(callback_id));
  impl_->post([i = impl_.get(), t = std::move(t)] { i->start(t); });
  std::weak_ptr<impl> weak = impl_;
  cancel.on_cancel([weak, id](const std::string& why) {
    if (auto i = weak.lock())
      i->post([i = i.get(), id, why] { i->cancel(id, why); });
  });
}

size_t http_client::running() const {
  return impl_->count.load();
}

registry::raw_async_handler http_handler(std::shared_ptr<http_client> client,
                                         http_kind_config cfg) {
  auto k = http_client::prepare(std::move(cfg));
  return [client = std::move(client), k](const nlohmann::json& args,
                                         const async_context& ctx,
                                         job_promise done) {
    client->start(k, ctx.id, job_document(args, ctx), std::move(done),
                  ctx.cancel, ctx.callback_id());
  };
}

} // namespace aw
