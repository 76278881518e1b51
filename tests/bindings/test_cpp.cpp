/*
 * test_cpp.cpp -- ctest "cpp": include/credisson.hpp against a real redis-server.
 *
 * Every standard requirement the header claims, used through the standard's own types:
 * std::lock_guard, std::unique_lock (try_lock_for / try_lock_until times out on a held
 * lock and succeeds after its release), std::scoped_lock over two locks (and two threads
 * taking them in opposite orders), std::shared_lock on the read lock; the shapes of
 * std::counting_semaphore and std::latch; owners (per thread, and an explicit owner whose
 * std::unique_lock moves to another thread); errors as error codes and as exceptions
 * with the library's words; a lost lock reaching the event handler, lost() and the
 * unlock's status; and exclusion across processes: C++ processes (this program,
 * --worker) and C processes (crdt_worker) increment one counter under one lock with no
 * update lost.
 *
 * A plain program, not Criterion: it runs in the TSan build as it is (Criterion cannot),
 * and it is built with g++ and clang++. It starts one redis-server on a free loopback
 * port (CRD_REDIS_SERVER, else redis-server) and runs the tests in turn, each on keys of
 * its own; a failed check ends its test, is printed with its line, and fails the run.
 * usage: test_cpp [--filter SUBSTRING]        test_cpp --worker PORT lock|semaphore NAME ROUNDS HOLD_US
 * CRDT_SABOTAGE=nolock makes every worker (C++ and C) skip its acquire: the exclusion
 * test must then fail.
 */
#include <credisson.hpp>

#include <hiredis/hiredis.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <spawn.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>

extern char **environ;

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

/* ---- checks --------------------------------------------------------------------------- */

struct failure {
    std::string what;
};

[[noreturn]] void fail_at(const char *file, int line, const std::string &what)
{
    char where[64];
    std::snprintf(where, sizeof where, "%s:%d: ", std::strrchr(file, '/') ? std::strrchr(file, '/') + 1 : file,
                  line);
    throw failure{where + what};
}

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            fail_at(__FILE__, __LINE__, "check failed: " #cond);                                   \
    } while (0)
#define CHECK_MSG(cond, msg)                                                                       \
    do {                                                                                           \
        if (!(cond))                                                                               \
            fail_at(__FILE__, __LINE__, std::string("check failed: " #cond ": ") + (msg));         \
    } while (0)

/* A thread whose failed check is kept and rethrown by join() on the test's thread. */
class checked_thread {
public:
    template <class F>
    explicit checked_thread(F fn)
        : t_([this, fn = std::move(fn)]() mutable {
              try {
                  fn();
              } catch (const failure &f) {
                  error_ = f.what;
              } catch (const std::exception &e) {
                  error_ = std::string("exception in a thread: ") + e.what();
              }
          })
    {
    }
    void join()
    {
        if (t_.joinable())
            t_.join();
        if (!error_.empty())
            throw failure{error_};
    }
    ~checked_thread()
    {
        if (t_.joinable())
            t_.join();
    }

private:
    std::string error_;
    std::thread t_;
};

/* Runs fn on a thread of its own (another owner of every lock) and waits for it there;
 * a check that fails on that thread fails the test. */
template <class F> void on_another_thread(F fn)
{
    checked_thread t(std::move(fn));
    t.join();
}

/* A value that only grows, waited on with a deadline. */
class gate {
public:
    void open(int v = 1)
    {
        std::lock_guard<std::mutex> g(mu_);
        if (v > value_)
            value_ = v;
        cv_.notify_all();
    }
    bool wait(int v = 1, std::chrono::milliseconds deadline = 10s)
    {
        std::unique_lock<std::mutex> g(mu_);
        return cv_.wait_for(g, deadline, [&] { return value_ >= v; });
    }
    int value()
    {
        std::lock_guard<std::mutex> g(mu_);
        return value_;
    }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    int value_ = 0;
};

long long ms_since(steady::time_point t0)
{
    return std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t0).count();
}

/* ---- the server and clients ----------------------------------------------------------- */

int port;
pid_t server_pid;
std::string current_test;
int key_seq;

int free_port();

std::string key(const char *suffix)
{
    return "cpp:" + current_test + ":" + std::to_string(getpid()) + "." + std::to_string(++key_seq) + ":" +
           suffix;
}

credisson::options opts()
{
    credisson::options o;
    o.port = port;
    return o;
}

struct raw {
    redisContext *r;
    raw()
    {
        struct timeval tv = {10, 0};
        r = redisConnectWithTimeout("127.0.0.1", port, tv);
        if (r == nullptr || r->err)
            throw failure{"cannot connect to the test server"};
        redisSetTimeout(r, tv);
    }
    ~raw() { redisFree(r); }
    raw(const raw &) = delete;
    raw &operator=(const raw &) = delete;

    long long integer(const std::vector<std::string> &args)
    {
        redisReply *rep = command(args);
        long long v = rep->type == REDIS_REPLY_INTEGER  ? rep->integer
                      : rep->type == REDIS_REPLY_STRING ? std::atoll(rep->str)
                                                        : 0;
        freeReplyObject(rep);
        return v;
    }
    void run(const std::vector<std::string> &args) { freeReplyObject(command(args)); }
    redisReply *command(const std::vector<std::string> &args)
    {
        std::vector<const char *> argv;
        std::vector<size_t> lens;
        for (const auto &a : args) {
            argv.push_back(a.data());
            lens.push_back(a.size());
        }
        void *rep = redisCommandArgv(r, static_cast<int>(argv.size()), argv.data(), lens.data());
        if (rep == nullptr)
            throw failure{"no reply from the test server"};
        return static_cast<redisReply *>(rep);
    }
};

/* Waits up to 5 s until the channel has a subscriber (PUBSUB NUMSUB): a holder under
 * prompt_loss_detection watches its lock's channel once its subscription is confirmed,
 * which may come just after the acquire returned. */
bool await_subscribed(raw &r, const std::string &channel)
{
    auto end = steady::now() + 5s;
    while (steady::now() < end) {
        redisReply *rep = r.command({"PUBSUB", "NUMSUB", channel});
        bool yes = rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 && rep->element[1]->integer > 0;
        freeReplyObject(rep);
        if (yes)
            return true;
        std::this_thread::sleep_for(2ms); /* not confirmed yet: look again by the deadline */
    }
    return false;
}

/* ---- the tests ---------------------------------------------------------------------- */

struct test_case {
    const char *name;
    void (*fn)();
};

std::vector<test_case> &registry()
{
    static std::vector<test_case> tests;
    return tests;
}

#define TEST(name)                                                                                 \
    void name();                                                                                   \
    const bool name##_registered = (registry().push_back({#name, &name}), true);                   \
    void name()

/* What the standard asks of each type, checked by the compiler. */
template <class M> constexpr bool timed_lockable()
{
    using std::declval;
    return std::is_same_v<decltype(declval<M &>().lock()), void> &&
           std::is_same_v<decltype(declval<M &>().try_lock()), bool> &&
           std::is_same_v<decltype(declval<M &>().try_lock_for(1ms)), bool> &&
           std::is_same_v<decltype(declval<M &>().try_lock_until(steady::now())), bool> &&
           noexcept(declval<M &>().unlock());
}
static_assert(timed_lockable<credisson::reentrant_lock>());
static_assert(timed_lockable<credisson::fair_lock>());
static_assert(timed_lockable<credisson::fenced_lock>());
static_assert(timed_lockable<credisson::lock_view>());
static_assert(timed_lockable<credisson::read_write_lock>());
static_assert(std::is_same_v<decltype(std::declval<credisson::read_write_lock &>().try_lock_shared_for(1ms)), bool>);
static_assert(noexcept(std::declval<credisson::read_write_lock &>().unlock_shared()));
static_assert(noexcept(std::declval<credisson::semaphore &>().try_acquire()));
static_assert(noexcept(std::declval<const credisson::latch &>().try_wait()));
static_assert(std::is_nothrow_move_constructible_v<credisson::client>);
static_assert(std::is_nothrow_move_constructible_v<credisson::reentrant_lock>);
static_assert(!std::is_copy_constructible_v<credisson::reentrant_lock>);
static_assert(!std::is_copy_constructible_v<credisson::permit>);
static_assert(std::is_error_code_enum_v<credisson::errc>);

TEST(lock_guard_holds_and_releases)
{
    credisson::client c(opts());
    credisson::reentrant_lock m(c, key("l"));
    {
        std::lock_guard<credisson::reentrant_lock> g(m);
        CHECK(m.is_held());
        CHECK(m.is_locked());
        CHECK(m.validity() > 0ms);
        on_another_thread([&] {
            CHECK(!m.try_lock()); /* another thread is another owner */
            CHECK(!m.is_held());
        });
    }
    CHECK(!m.is_locked());
    CHECK(!credisson::last_error());
}

TEST(unique_lock_try_lock_for_times_out_on_a_held_lock_and_succeeds_after_release)
{
    credisson::client c(opts());
    credisson::reentrant_lock m(c, key("l"));
    gate held, release, released;
    checked_thread holder([&] {
        std::unique_lock<credisson::reentrant_lock> h(m);
        held.open();
        CHECK(release.wait());
        h.unlock();
        released.open();
    });
    CHECK(held.wait());
    std::unique_lock<credisson::reentrant_lock> u(m, std::defer_lock);
    auto t0 = steady::now();
    CHECK(!u.try_lock_for(200ms));
    long long waited = ms_since(t0);
    CHECK_MSG(waited >= 195 && waited < 3000, std::to_string(waited) + " ms");
    CHECK(!u.owns_lock());
    t0 = steady::now();
    CHECK(!u.try_lock_until(steady::now() + 100ms));
    CHECK(!u.try_lock_until(std::chrono::system_clock::now() + 100ms));
    CHECK(ms_since(t0) >= 190);
    CHECK(!u.try_lock_for(-5s)); /* a non-positive wait tries once */

    checked_thread releaser([&] { release.open(); });
    t0 = steady::now();
    CHECK(u.try_lock_for(10s)); /* woken by the release */
    CHECK(released.wait());
    CHECK(u.owns_lock());
    CHECK(m.is_held());
    CHECK_MSG(ms_since(t0) < 5000, std::to_string(ms_since(t0)) + " ms");
    u.unlock();
    CHECK(!m.is_locked());
    holder.join();
    releaser.join();
}

TEST(scoped_lock_takes_two_locks_and_never_deadlocks_in_opposite_orders)
{
    credisson::client c(opts());
    credisson::reentrant_lock a(c, key("a")), b(c, key("b"));
    gate b_held, b_release, entered;
    checked_thread holder([&] {
        std::lock_guard<credisson::reentrant_lock> g(b);
        b_held.open();
        CHECK(b_release.wait());
    });
    CHECK(b_held.wait());
    checked_thread both([&] {
        std::scoped_lock s(a, b);
        CHECK(a.is_held());
        CHECK(b.is_held());
        entered.open();
    });
    CHECK(!entered.wait(1, 150ms)); /* b is held: the scoped_lock waits */
    b_release.open();
    CHECK(entered.wait());
    both.join();
    holder.join();
    CHECK(!a.is_locked());
    CHECK(!b.is_locked());

    /* Two threads, opposite orders, one critical section: std::lock backs off. */
    std::atomic<int> inside{0}, overlaps{0}, done{0};
    auto worker = [&](bool ab) {
        for (int i = 0; i < 15; i++) {
            std::optional<std::scoped_lock<credisson::reentrant_lock, credisson::reentrant_lock>> s;
            if (ab)
                s.emplace(a, b);
            else
                s.emplace(b, a);
            if (inside.fetch_add(1) != 0)
                overlaps++;
            inside.fetch_sub(1);
            done++;
        }
    };
    checked_thread t1([&] { worker(true); }), t2([&] { worker(false); });
    t1.join();
    t2.join();
    CHECK(done == 30);
    CHECK(overlaps == 0);
    CHECK(!a.is_locked() && !b.is_locked());
}

TEST(shared_lock_holds_the_read_lock_with_other_readers_and_excludes_a_writer)
{
    credisson::client c(opts());
    credisson::read_write_lock rw(c, key("rw"));
    gate readers_in, readers_leave;
    auto reader = [&] {
        std::shared_lock<credisson::read_write_lock> r(rw);
        CHECK(rw.reader().is_held());
        readers_in.open(readers_in.value() + 1);
        CHECK(readers_in.wait(2)); /* both readers inside at once */
        CHECK(readers_leave.wait());
    };
    {
        checked_thread r1(reader), r2(reader);
        CHECK(readers_in.wait(2));
        std::unique_lock<credisson::read_write_lock> w(rw, std::defer_lock);
        CHECK(!w.try_lock_for(100ms)); /* readers hold it */
        readers_leave.open();
        r1.join();
        r2.join();
        CHECK(w.try_lock_for(10s));
        CHECK(rw.writer().is_held());
        on_another_thread([&] {
            std::shared_lock<credisson::read_write_lock> r(rw, 100ms); /* try_lock_shared_for */
            CHECK(!r.owns_lock());
        });
        w.unlock();
    }
    checked_thread reader_after([&] {
        std::shared_lock<credisson::read_write_lock> r(rw, std::defer_lock);
        CHECK(r.try_lock_for(5s));
        /* No upgrade: a reader asking for the write lock fails at once. */
        std::error_code ec;
        auto t0 = steady::now();
        CHECK(!rw.writer().try_lock_for(5s, ec));
        CHECK_MSG(ec == credisson::errc::deadlock, ec.message());
        CHECK(ec == std::errc::resource_deadlock_would_occur);
        CHECK(ms_since(t0) < 1000);
        bool threw = false;
        try {
            rw.try_lock();
        } catch (const credisson::error &e) {
            threw = e.code() == credisson::errc::deadlock;
        }
        CHECK(threw);
    });
    reader_after.join();
    CHECK(!rw.reader().is_locked());
}

TEST(a_thread_is_an_owner_and_holds_reentrantly)
{
    credisson::client c(opts());
    credisson::reentrant_lock m(c, key("l"));
    m.lock();
    CHECK(m.try_lock()); /* the same thread again */
    CHECK(m.hold_count() == 2);
    on_another_thread([&] {
        CHECK(m.hold_count() == 0);
        CHECK(!m.try_lock_for(50ms));
    });
    m.unlock();
    CHECK(m.hold_count() == 1);
    m.unlock();
    CHECK(!m.is_locked());
    CHECK(!credisson::last_error());
}

TEST(an_explicit_owner_lets_a_unique_lock_move_to_another_thread)
{
    credisson::client c(opts());
    credisson::reentrant_lock m(c, key("l"));
    credisson::owner o;
    credisson::lock_view v = m.with_owner(o);
    std::unique_lock<credisson::lock_view> u(v);
    CHECK(m.with_owner(o).is_held());
    CHECK(!m.is_held()); /* this thread's own owner holds nothing */
    checked_thread other([&, moved = std::move(u)]() mutable {
        CHECK(moved.owns_lock());
        std::error_code ec;
        moved.mutex()->unlock(ec); /* released on another thread: the owner's */
        CHECK_MSG(!ec, ec.message());
        moved.release();
    });
    other.join();
    CHECK(!m.is_locked());

    /* A thread-owned hold cannot be released from another thread. */
    std::unique_lock<credisson::reentrant_lock> t(m);
    on_another_thread([&] {
        std::error_code ec;
        m.unlock(ec);
        CHECK(ec == credisson::errc::not_owner);
        m.unlock(); /* the noexcept form says it in last_error() */
        CHECK(credisson::last_error() == credisson::errc::not_owner);
    });
    CHECK(m.is_held());
    t.unlock();
    CHECK(!m.is_locked());
}

TEST(errors_are_error_codes_and_exceptions_with_the_librarys_words)
{
    CHECK(std::string(credisson::category().name()) == "credisson");
    CHECK(credisson::make_error_code(credisson::errc::timeout).message() == crd_strerror(CRD_TIMEOUT));
    CHECK(std::error_code(credisson::errc::timeout) == std::errc::timed_out);
    CHECK(std::error_code(credisson::errc::busy) == std::errc::device_or_resource_busy);

    /* A bad URL: the constructor throws; the error_code form sets ec. */
    credisson::options bad = opts();
    bad.url = "redis://127.0.0.1:notaport";
    bool threw = false;
    try {
        credisson::client c(bad);
    } catch (const credisson::error &e) {
        threw = true;
        CHECK(e.code() == credisson::errc::invalid_argument);
        CHECK(e.code() == std::errc::invalid_argument);
        CHECK(e.status() == CRD_INVALID_ARGUMENT);
        std::string what = e.what();
        CHECK_MSG(what.find("notaport") != std::string::npos || what.find("port") != std::string::npos, what);
        CHECK_MSG(what.find(crd_strerror(CRD_INVALID_ARGUMENT)) != std::string::npos, what);
    }
    CHECK(threw);
    std::error_code ec;
    credisson::client failed(bad, ec);
    CHECK(ec == credisson::errc::invalid_argument);
    CHECK(std::strlen(failed.last_error_message()) > 0);

    /* Nobody listens: CRD_IO, as a system_error. */
    credisson::options closed = opts();
    closed.port = free_port();
    closed.connect_timeout_ms = 2000;
    threw = false;
    try {
        credisson::client c(closed);
    } catch (const std::system_error &e) {
        threw = e.code() == credisson::errc::io && e.code() == std::errc::io_error;
    }
    CHECK(threw);

    credisson::client c(opts());
    /* An empty name. */
    threw = false;
    try {
        credisson::reentrant_lock l(c, "");
    } catch (const credisson::error &e) {
        threw = e.code() == credisson::errc::invalid_argument;
    }
    CHECK(threw);
    credisson::reentrant_lock unnamed(c, "", ec);
    CHECK(ec == credisson::errc::invalid_argument);

    /* WRONGTYPE: a string where the lock's hash would be. */
    std::string k = key("string");
    raw r;
    r.run({"SET", k, "not a lock"});
    credisson::reentrant_lock l(c, k);
    threw = false;
    try {
        l.lock();
    } catch (const credisson::error &e) {
        threw = true;
        CHECK(e.code() == credisson::errc::server);
        CHECK_MSG(std::string(e.what()).find("WRONGTYPE") != std::string::npos, e.what());
    }
    CHECK(threw);
    CHECK(!l.try_lock_for(10ms, ec));
    CHECK(ec == credisson::errc::server);
    CHECK(std::string(c.last_error_message()).find("WRONGTYPE") != std::string::npos);
    threw = false;
    try {
        l.try_lock();
    } catch (const credisson::error &) {
        threw = true;
    }
    CHECK(threw);

    /* The noexcept forms of the standard say it in last_error(). */
    credisson::semaphore s(c, k);
    CHECK(!s.try_acquire());
    CHECK(credisson::last_error() == credisson::errc::server);
    CHECK(!s.try_acquire(ec));
    CHECK(ec == credisson::errc::server);
    credisson::latch la(c, k);
    CHECK(!la.try_wait());
    CHECK_MSG(credisson::last_error() == credisson::errc::protocol, credisson::last_error().message());

    /* Unlocking what this thread does not hold. */
    credisson::reentrant_lock free_lock(c, key("free"));
    free_lock.unlock();
    CHECK(credisson::last_error() == credisson::errc::not_owner);
    free_lock.unlock(ec);
    CHECK(ec == credisson::errc::not_owner);
    CHECK(ec == std::errc::operation_not_permitted);
}

TEST(a_lost_lock_reaches_the_handler_lost_and_the_unlock)
{
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::string> lost_names;
    credisson::options o = opts();
    o.prompt_loss_detection = true;
    o.handle_event = [&](const credisson::event &e) {
        if (e.kind != CRD_EVENT_LOCK_LOST)
            return;
        std::lock_guard<std::mutex> g(mu);
        lost_names.emplace_back(e.name);
        cv.notify_all();
    };
    credisson::client c(o);
    credisson::client other(opts());
    std::string name = key("l");
    credisson::reentrant_lock m(c, name);
    credisson::reentrant_lock theirs(other, name);
    raw r;
    {
        std::lock_guard<credisson::reentrant_lock> g(m);
        CHECK(!m.lost());
        CHECK(await_subscribed(r, "redisson_lock__channel:{" + name + "}"));
        CHECK(theirs.force_unlock());
        std::unique_lock<std::mutex> w(mu);
        CHECK(cv.wait_for(w, 5s, [&] { return !lost_names.empty(); }));
        CHECK(lost_names.front() == name);
        w.unlock();
        CHECK(m.lost());
        std::error_code ec;
        CHECK(m.validity(ec) == 0ms);
        CHECK(ec == credisson::errc::lock_lost);
    } /* the guard's unlock: lost */
    CHECK(credisson::last_error() == credisson::errc::lock_lost);

    m.lock();
    CHECK(await_subscribed(r, "redisson_lock__channel:{" + name + "}"));
    CHECK(theirs.force_unlock());
    std::unique_lock<std::mutex> w(mu);
    CHECK(cv.wait_for(w, 5s, [&] { return lost_names.size() == 2; }));
    w.unlock();
    std::error_code ec;
    m.unlock(ec);
    CHECK(ec == credisson::errc::lock_lost);
}

TEST(semaphore_has_the_shape_of_counting_semaphore)
{
    credisson::client c(opts());
    credisson::semaphore s(c, key("s"));
    CHECK(s.try_set_permits(2));
    CHECK(!s.try_set_permits(5)); /* only the first sets them */
    s.acquire();
    CHECK(s.try_acquire());
    CHECK(!s.try_acquire());
    CHECK(!credisson::last_error()); /* none left is an answer, not a failure */
    CHECK(!s.try_acquire_for(100ms));
    CHECK(!s.try_acquire_until(steady::now() + 50ms));
    CHECK(s.available() == 0);
    gate released;
    checked_thread t([&] {
        s.release(); /* permits have no owner */
        released.open();
    });
    CHECK(s.try_acquire_for(10s));
    CHECK(released.wait());
    t.join();
    s.release(2);
    CHECK(s.available() == 2);
    CHECK(s.try_acquire_for(1s, 2));
    CHECK(s.available() == 0);
    s.release(2);
    CHECK(s.drain() == 2);
}

TEST(latch_has_the_shape_of_std_latch)
{
    credisson::client c(opts());
    std::string name = key("latch");
    credisson::latch l(c, name);
    CHECK(l.try_wait()); /* a latch that does not exist is at zero */
    CHECK(l.try_set_count(2));
    CHECK(!l.try_set_count(3));
    CHECK(!l.try_wait());
    CHECK(!credisson::last_error());
    gate done;
    checked_thread waiter([&] {
        l.wait();
        done.open();
    });
    l.count_down();
    CHECK(l.count() == 1);
    CHECK(!done.wait(1, 100ms));
    CHECK(!l.wait_for(50ms));
    l.count_down();
    CHECK(done.wait());
    waiter.join();
    CHECK(l.try_wait());
    CHECK(l.count() == 0);
    CHECK(l.try_set_count(1));
    l.arrive_and_wait();
    CHECK(l.try_wait());
}

TEST(a_permit_is_released_by_its_destructor)
{
    credisson::client c(opts());
    credisson::permit_semaphore ps(c, key("ps"));
    CHECK(ps.try_set_permits(1));
    {
        credisson::permit p = ps.acquire(30s);
        CHECK(static_cast<bool>(p));
        CHECK(p.id().size() == 32);
        CHECK(p.lease_left() > 0ms);
        CHECK(!ps.try_acquire_for(0ms).has_value());
        CHECK(ps.acquired() == 1);
    }
    CHECK(!credisson::last_error());
    CHECK(ps.available() == 1);
    std::optional<credisson::permit> q = ps.try_acquire_for(1s);
    CHECK(q.has_value());
    q->release();
    CHECK(!*q);
    CHECK(ps.available() == 1);
}

TEST(fenced_lock_tokens_increase)
{
    credisson::client c(opts());
    credisson::fenced_lock f(c, key("f"));
    std::int64_t t1 = f.lock_token();
    f.unlock();
    std::optional<std::int64_t> t2 = f.try_lock_token_for(1s);
    CHECK(t2.has_value());
    CHECK(*t2 > t1);
    CHECK(f.token() == *t2);
    f.unlock();
}

/* ---- exclusion across processes ----------------------------------------------------- */

const char inside_script[] = "local v = redis.call('INCR', KEYS[1]) "
                             "if v > tonumber(redis.call('GET', KEYS[2]) or '0') then "
                             "redis.call('SET', KEYS[2], v) end return v";

/* The C++ worker: the rounds of tests/bindings/worker.c through this header. */
int worker_main(int argc, char **argv)
{
    if (argc < 7)
        return 2;
    port = std::atoi(argv[2]);
    bool is_lock = std::strcmp(argv[3], "lock") == 0;
    std::string name = argv[4];
    int rounds = std::atoi(argv[5]);
    long hold_us = std::atol(argv[6]);
    const char *sabotage = std::getenv("CRDT_SABOTAGE");
    bool nolock = sabotage != nullptr && std::strcmp(sabotage, "nolock") == 0;
    try {
        raw r;
        credisson::client c(opts());
        std::optional<credisson::reentrant_lock> l;
        std::optional<credisson::semaphore> s;
        if (is_lock)
            l.emplace(c, name);
        else
            s.emplace(c, name);
        redisReply *go = r.command({"BLPOP", name + ":go", "30"});
        bool started = go->type == REDIS_REPLY_ARRAY;
        freeReplyObject(go);
        if (!started)
            return 5;
        for (int i = 0; i < rounds; i++) {
            std::unique_lock<credisson::reentrant_lock> held;
            if (!nolock && is_lock)
                held = std::unique_lock<credisson::reentrant_lock>(*l);
            if (!nolock && !is_lock)
                s->acquire();
            r.integer({"EVAL", inside_script, "2", name + ":inside", name + ":max"});
            long long v = r.integer({"GET", name + ":counter"});
            if (hold_us > 0)
                std::this_thread::sleep_for(std::chrono::microseconds(hold_us)); /* widen the race */
            r.run({"SET", name + ":counter", std::to_string(v + 1)});
            r.integer({"DECR", name + ":inside"});
            if (!nolock && !is_lock)
                s->release();
            if (held) {
                std::error_code ec;
                held.mutex()->unlock(ec);
                held.release();
                if (ec)
                    return 8;
            }
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "test_cpp --worker: %s\n", e.what());
        return 6;
    } catch (const failure &f) {
        std::fprintf(stderr, "test_cpp --worker: %s\n", f.what.c_str());
        return 7;
    }
    return 0;
}

pid_t spawn(const std::vector<std::string> &args)
{
    std::vector<char *> argv;
    for (const auto &a : args)
        argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0)
        throw failure{"cannot start " + args[0]};
    return pid;
}

/* Waits for every child by one deadline; returns their exit codes (-1: killed late). */
std::vector<int> wait_all(std::vector<pid_t> &pids, std::chrono::milliseconds deadline)
{
    std::vector<int> codes(pids.size(), -1);
    auto end = steady::now() + deadline;
    size_t left = pids.size();
    while (left > 0 && steady::now() < end) {
        int status = 0;
        pid_t p = waitpid(-1, &status, WNOHANG);
        if (p <= 0) {
            std::this_thread::sleep_for(5ms); /* nothing exited yet: look again by the deadline */
            continue;
        }
        for (size_t i = 0; i < pids.size(); i++)
            if (pids[i] == p) {
                codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                pids[i] = 0;
                left--;
            }
    }
    for (auto &p : pids)
        if (p > 0) {
            kill(p, SIGKILL);
            waitpid(p, nullptr, 0);
        }
    return codes;
}

std::string self_path;

TEST(cpp_and_c_processes_exclude_each_other_on_one_counter)
{
    const int per_language = 4, rounds = 40;
    std::string name = key("counter");
    std::vector<pid_t> pids;
    for (int i = 0; i < per_language; i++) {
        pids.push_back(spawn({self_path, "--worker", std::to_string(port), "lock", name, std::to_string(rounds),
                              "200"}));
        pids.push_back(spawn({CRDT_WORKER_PATH, std::to_string(port), "lock", name, std::to_string(rounds), "200"}));
    }
    raw r;
    std::vector<std::string> go = {"RPUSH", name + ":go"};
    for (size_t i = 0; i < pids.size(); i++)
        go.push_back("1");
    r.run(go);
    std::vector<int> codes = wait_all(pids, 60s);
    for (size_t i = 0; i < codes.size(); i++)
        CHECK_MSG(codes[i] == 0, std::string(i % 2 ? "C" : "C++") + " worker exit " + std::to_string(codes[i]));
    long long counter = r.integer({"GET", name + ":counter"});
    long long max = r.integer({"GET", name + ":max"});
    const long long total = 2LL * per_language * rounds;
    std::printf("  %d C++ and %d C processes, %d rounds each: counter %lld of %lld (%lld lost), "
                "most holders inside at once %lld\n",
                per_language, per_language, rounds, counter, total, total - counter, max);
    CHECK_MSG(counter == total, std::to_string(total - counter) + " updates lost");
    CHECK_MSG(max == 1, std::to_string(max) + " holders inside at once");
}

/* A loopback port the kernel just gave out (another process may take it first: the
 * server start retries). */
int free_port()
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int p = -1;
    if (bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) == 0)
        p = ntohs(a.sin_port);
    close(fd);
    return p;
}

bool answers_ping(int p)
{
    struct timeval tv = {0, 200000};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", p, tv);
    bool up = false;
    if (r != nullptr && r->err == 0) {
        void *rep = redisCommand(r, "PING");
        up = rep != nullptr && static_cast<redisReply *>(rep)->type == REDIS_REPLY_STATUS;
        if (rep != nullptr)
            freeReplyObject(rep);
    }
    if (r != nullptr)
        redisFree(r);
    return up;
}

void stop_server()
{
    if (server_pid > 0) {
        kill(server_pid, SIGKILL);
        waitpid(server_pid, nullptr, 0);
    }
    server_pid = 0;
}

/* redis-server on a free port, killed with this process (PR_SET_PDEATHSIG); waits up to
 * 5 s for its PING. Before any thread exists, so fork() is safe. */
bool start_server()
{
    const char *prog = std::getenv("CRD_REDIS_SERVER");
    if (prog == nullptr)
        prog = "redis-server";
    for (int attempt = 0; attempt < 5; attempt++) {
        port = free_port();
        std::string p = std::to_string(port);
        pid_t parent = getpid();
        server_pid = fork();
        if (server_pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(127);
            int devnull = open("/dev/null", O_RDWR);
            if (devnull >= 0) {
                dup2(devnull, 0);
                dup2(devnull, 1);
                dup2(devnull, 2);
            }
            execlp(prog, prog, "--port", p.c_str(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                   "--dir", "/tmp", static_cast<char *>(nullptr));
            _exit(127);
        }
        auto end = steady::now() + 5s;
        while (server_pid > 0 && steady::now() < end) {
            if (answers_ping(port))
                return true;
            if (waitpid(server_pid, nullptr, WNOHANG) == server_pid) {
                server_pid = 0; /* the port was taken: another one */
                break;
            }
            std::this_thread::sleep_for(10ms); /* not listening yet: look again */
        }
        stop_server();
    }
    return false;
}

} // namespace

int main(int argc, char **argv)
{
    if (argc > 1 && std::strcmp(argv[1], "--worker") == 0)
        return worker_main(argc, argv);
    const char *filter = argc > 2 && std::strcmp(argv[1], "--filter") == 0 ? argv[2] : nullptr;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return 1;
    exe[n] = '\0';
    self_path = exe;
    if (!start_server()) {
        std::fprintf(stderr, "test_cpp: cannot start redis-server\n");
        return 1;
    }
    int failed = 0, ran = 0;
    for (const auto &t : registry()) {
        if (filter != nullptr && std::strstr(t.name, filter) == nullptr)
            continue;
        current_test = t.name;
        auto t0 = steady::now();
        ran++;
        try {
            t.fn();
            std::printf("ok   %s (%lld ms)\n", t.name, ms_since(t0));
        } catch (const failure &f) {
            failed++;
            std::printf("FAIL %s: %s\n", t.name, f.what.c_str());
        } catch (const std::exception &e) {
            failed++;
            std::printf("FAIL %s: unexpected exception: %s\n", t.name, e.what());
        }
        std::fflush(stdout);
    }
    stop_server();
    std::printf("test_cpp: %d tests, %d failed\n", ran, failed);
    return failed == 0 && ran > 0 ? 0 : 1;
}
