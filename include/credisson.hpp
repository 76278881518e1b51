/*
 * credisson.hpp -- the C++ API of credisson: RAII types over <credisson.h> in the shapes
 * of the standard library, so that std::lock_guard, std::unique_lock, std::scoped_lock
 * and std::shared_lock work on Redisson's distributed locks.
 *
 * Header-only, C++17, no dependency but the C library (link with -lcredisson, or
 * credisson::credisson in CMake). Every type forwards to one C function and adds no
 * behaviour of its own: waits, leases, reentrancy, wake-ups, lost holds are the C
 * library's, documented in <credisson.h>, which stays the manual. Where a function
 * below says "as crd_x", read crd_x there.
 *
 *     credisson::client redis("redis://127.0.0.1:6379");
 *     credisson::reentrant_lock job(redis, "nightly-report"); // Java: getLock(...)
 *     {
 *         std::unique_lock<credisson::reentrant_lock> held(job, std::defer_lock);
 *         if (held.try_lock_for(std::chrono::seconds(10))) {
 *             // ... the critical section ...
 *         }
 *     }
 *
 * WHICH STANDARD REQUIREMENTS EACH TYPE MEETS
 *   reentrant_lock, fair_lock, fenced_lock, lock_view   Lockable and TimedLockable (lock, try_lock,
 *       try_lock_for, try_lock_until, unlock); recursive per owner, as
 *       std::recursive_timed_mutex (Redisson's RLock is reentrant).
 *   read_write_lock   TimedLockable for the write lock and SharedTimedLockable for the read
 *       lock (lock_shared, try_lock_shared, try_lock_shared_for/_until, unlock_shared), as
 *       std::shared_timed_mutex: std::unique_lock writes, std::shared_lock reads.
 *   semaphore   the members of std::counting_semaphore (acquire, try_acquire,
 *       try_acquire_for, try_acquire_until, release(n)).
 *   latch   the members of std::latch (count_down, try_wait, wait, arrive_and_wait).
 *
 * OWNERS: WHO HOLDS A LOCK
 *   As in C, the owner of a hold is, by default, the calling thread (crd_owner_current):
 *   a credisson::reentrant_lock behaves like a std::recursive_timed_mutex shared by threads. Each
 *   thread that locks it is its own owner, so threads of one process exclude each other
 *   as processes do, and a thread that locks twice holds it twice. As with std::mutex,
 *   unlock on the thread that locked: a std::unique_lock moved to another thread and
 *   unlocked there fails (errc::not_owner, see unlock()).
 *   To hand a hold from one thread to another, name the owner: credisson::owner o;
 *   auto v = job.with_owner(o); gives a lock_view whose every call is made for o
 *   (crd_lock_acquire_owner ...). std::unique_lock<credisson::lock_view> over it may be
 *   locked on one thread, moved, and unlocked on another. All views with one owner are
 *   one owner (reentrant), so do not share one owner between threads that must exclude
 *   each other.
 *
 * ERRORS
 *   Every C status is a std::error_code of credisson::category() (credisson::errc, whose
 *   values are the crd_status values; message() is crd_strerror). Some compare equal to
 *   the standard's conditions: errc::timeout == std::errc::timed_out, errc::busy ==
 *   std::errc::device_or_resource_busy, errc::invalid_argument ==
 *   std::errc::invalid_argument, errc::no_memory == std::errc::not_enough_memory,
 *   errc::not_owner == std::errc::operation_not_permitted, errc::deadlock ==
 *   std::errc::resource_deadlock_would_occur, errc::cancelled ==
 *   std::errc::operation_canceled, errc::io == std::errc::io_error, errc::interrupted ==
 *   std::errc::interrupted.
 *   - Every call that can fail has an overload taking std::error_code& that never
 *     throws: it clears ec on success and sets it on failure. Outcomes are not
 *     failures: a try that finds the lock held, or a wait that runs out, returns false
 *     and leaves ec clear.
 *   - The overloads without it throw credisson::error (a std::system_error whose code()
 *     is the status and whose what() carries the library's detail, crd_client_errmsg:
 *     Redis's own words, which argument was wrong). Outcomes again are return values
 *     (false, std::nullopt), never exceptions.
 *   - Where the standard's signature cannot report a failure (unlock() and
 *     unlock_shared(), which lock guards call from destructors; semaphore::try_acquire()
 *     and latch::try_wait(), which are noexcept in the standard; the destructor of a
 *     permit that releases it), the call does not throw: it returns (false for a try)
 *     and stores the failure in credisson::last_error(), per thread, as errno is.
 *
 * A LOST LOCK
 *   A hold can end without a release (its lease ran out, someone force-unlocked it).
 *   The application learns it three ways, all from C: the client's event handler
 *   (options::handle_event) is told CRD_EVENT_LOCK_LOST for holds under the watchdog;
 *   lost() and validity() of the lock say it while the owner still believes it holds;
 *   and the unlock returns errc::lock_lost (unlock(ec), or last_error() after unlock()).
 *
 * THREADS
 *   A client and every object may be shared by threads, as the C handles may (a lock
 *   per thread is not needed: each thread is its own owner). Moving or destroying an
 *   object while another thread uses it is a data race, as for any C++ object. Handlers
 *   run on the library's threads (named at options::handle_event) and must not call into
 *   the same client; an exception escaping a handler calls std::terminate.
 *
 * LIFETIMES
 *   Objects refer to their client: destroy them before the client (a lock, semaphore or
 *   latch after its client's destructor may only be destroyed). Holds outlive the
 *   objects: destroying a lock does not release it (the C library renews it until it is
 *   released through another object of the name, or expires); use a guard.
 */
#ifndef CREDISSON_HPP
#define CREDISSON_HPP

#include <credisson.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

namespace credisson {

/* ---------------------------------------------------------------------------------- */
/* Errors                                                                              */
/* ---------------------------------------------------------------------------------- */

/* The C statuses as error codes (values equal to crd_status; 0 is success). */
enum class errc : int {
    busy = CRD_BUSY,
    timeout = CRD_TIMEOUT,
    not_owner = CRD_NOT_OWNER,
    lock_lost = CRD_LOCK_LOST,
    invalid_argument = CRD_INVALID_ARGUMENT,
    io = CRD_IO,
    protocol = CRD_PROTOCOL,
    server = CRD_SERVER,
    no_memory = CRD_NO_MEMORY,
    closed = CRD_CLOSED,
    auth = CRD_AUTH,
    deadlock = CRD_DEADLOCK,
    forked = CRD_FORKED,
    skipped = CRD_SKIPPED,
    degraded = CRD_DEGRADED,
    cancelled = CRD_CANCELLED,
    not_synced = CRD_NOT_SYNCED,
    outcome_unknown = CRD_OUTCOME_UNKNOWN,
    sync_unavailable = CRD_SYNC_UNAVAILABLE,
    interrupted = CRD_INTERRUPTED
};

} // namespace credisson

/* errc converts to std::error_code, so ec == credisson::errc::timeout compiles. */
namespace std {
template <> struct is_error_code_enum<credisson::errc> : true_type {};
} // namespace std

namespace credisson {

namespace detail {
class category_impl final : public std::error_category {
public:
    const char *name() const noexcept override { return "credisson"; }
    std::string message(int value) const override
    {
        return crd_strerror(static_cast<crd_status>(value));
    }
    std::error_condition default_error_condition(int value) const noexcept override
    {
        /* The standard conditions the portable ones compare equal to. */
        static const struct {
            crd_status st;
            std::errc cond;
        } conditions[] = {
            {CRD_TIMEOUT, std::errc::timed_out},
            {CRD_BUSY, std::errc::device_or_resource_busy},
            {CRD_INVALID_ARGUMENT, std::errc::invalid_argument},
            {CRD_NO_MEMORY, std::errc::not_enough_memory},
            {CRD_NOT_OWNER, std::errc::operation_not_permitted},
            {CRD_DEADLOCK, std::errc::resource_deadlock_would_occur},
            {CRD_CANCELLED, std::errc::operation_canceled},
            {CRD_IO, std::errc::io_error},
            {CRD_INTERRUPTED, std::errc::interrupted},
        };
        for (const auto &m : conditions)
            if (m.st == value)
                return m.cond;
        return std::error_condition(value, *this);
    }
};
} // namespace detail

/* The error category of every credisson error code: name() "credisson", message() the
 * status's crd_strerror text. One object per program. */
inline const std::error_category &category() noexcept
{
    static const detail::category_impl instance;
    return instance;
}

inline std::error_code make_error_code(errc e) noexcept
{
    return std::error_code(static_cast<int>(e), category());
}

/* The error code of a C status (CRD_OK gives a clear code). */
inline std::error_code to_error_code(crd_status st) noexcept
{
    return std::error_code(static_cast<int>(st), category());
}

/* What the throwing overloads throw: code() is the status, what() is the library's detail
 * (crd_client_errmsg at the moment of the failure) followed by the status text. */
class error : public std::system_error {
public:
    error(std::error_code code, const std::string &detail) : std::system_error(code, detail) {}
    /* The C status. */
    crd_status status() const noexcept { return static_cast<crd_status>(code().value()); }
};

namespace detail {
inline std::error_code &last_error_slot() noexcept
{
    thread_local std::error_code slot;
    return slot;
}
} // namespace detail

/* The failure of the calling thread's most recent non-throwing call whose standard
 * signature has no way to say it (unlock(), unlock_shared(), semaphore::try_acquire(),
 * latch::try_wait(), a permit's destructor): clear when that call succeeded. Its detail
 * is client::last_error_message() until the thread's next call into the client. */
inline std::error_code last_error() noexcept
{
    return detail::last_error_slot();
}

namespace detail {
/* Throws credisson::error for a failed status, with the client's detail message. */
[[noreturn]] inline void raise(crd_status st, const crd_client *c, const char *what)
{
    const char *msg = crd_client_errmsg(c);
    std::string detail = (msg != nullptr && msg[0] != '\0') ? std::string(msg) : std::string(what);
    throw error(to_error_code(st), detail);
}

inline void check(crd_status st, const crd_client *c, const char *what)
{
    if (st != CRD_OK)
        raise(st, c, what);
}

/* Sets ec from st: clear for CRD_OK, the status otherwise. Returns st == CRD_OK. */
inline bool set(std::error_code &ec, crd_status st) noexcept
{
    if (st == CRD_OK)
        ec.clear();
    else
        ec = to_error_code(st);
    return st == CRD_OK;
}

/* An acquire's answer: true for CRD_OK; false with ec clear for the outcomes "held
 * elsewhere" and "the wait ran out"; false with ec set for a failure. */
inline bool acquired(std::error_code &ec, crd_status st) noexcept
{
    if (st == CRD_BUSY || st == CRD_TIMEOUT) {
        ec.clear();
        return false;
    }
    return set(ec, st);
}

/* For the throwing overloads: true, false for the outcomes, or throws. */
inline bool acquired_or_throw(crd_status st, const crd_client *c, const char *what)
{
    if (st == CRD_BUSY || st == CRD_TIMEOUT)
        return false;
    check(st, c, what);
    return true;
}

/* Records a failure of a call that cannot report it (the standard's signature). */
inline bool record(crd_status st) noexcept
{
    if (st == CRD_OK)
        last_error_slot().clear();
    else
        last_error_slot() = to_error_code(st);
    return st == CRD_OK;
}

/* A std::chrono wait as the C library's wait_ms, by the standard's rules for timed
 * waits: a duration of zero or less tries once (0); a positive one is rounded up to whole
 * milliseconds (a wait is never shortened into a try), at most CRD_DURATION_MAX_MS (ten
 * years: as good as for ever). */
template <class Rep, class Period>
inline std::int64_t wait_ms(const std::chrono::duration<Rep, Period> &d) noexcept
{
    using fms = std::chrono::duration<long double, std::milli>;
    const long double v = std::chrono::duration_cast<fms>(d).count();
    if (!(v > 0.0L))
        return 0;
    if (v >= static_cast<long double>(CRD_DURATION_MAX_MS))
        return CRD_DURATION_MAX_MS;
    std::int64_t ms = static_cast<std::int64_t>(v);
    if (static_cast<long double>(ms) < v)
        ++ms;
    return ms;
}

/* A time point as the wait left until it, measured once on its own clock. */
template <class Clock, class Duration>
inline std::int64_t until_ms(const std::chrono::time_point<Clock, Duration> &t) noexcept
{
    return wait_ms(t - Clock::now());
}

inline std::chrono::milliseconds ms(std::int64_t v) noexcept
{
    return std::chrono::milliseconds(static_cast<std::chrono::milliseconds::rep>(v));
}

inline std::int64_t lease_ms(std::chrono::milliseconds lease) noexcept
{
    return static_cast<std::int64_t>(lease.count());
}
} // namespace detail

/* ---------------------------------------------------------------------------------- */
/* Constants and owners                                                                */
/* ---------------------------------------------------------------------------------- */

/* The lease that means "hold until released, renewed by the watchdog"
 * (CRD_LEASE_WATCHDOG): the default lease of every lock. */
inline constexpr std::chrono::milliseconds watchdog{CRD_LEASE_WATCHDOG};
/* A permit's lease that never expires (CRD_PERMIT_NO_LEASE). */
inline constexpr std::chrono::milliseconds no_lease{CRD_PERMIT_NO_LEASE};

/* An explicit owner id (crd_owner_new): a hold that is not the calling thread's, for
 * locking on one thread and unlocking on another. Copies are the same owner. */
class owner {
public:
    /* A fresh id, never a thread's, never repeated in this process. */
    owner() noexcept : id_(crd_owner_new()) {}
    /* An id you have (from crd_owner_new, or crd_owner_current of some thread). */
    explicit owner(std::uint64_t id) noexcept : id_(id) {}
    /* The calling thread's own id (crd_owner_current). */
    static owner this_thread() noexcept { return owner(crd_owner_current()); }
    std::uint64_t id() const noexcept { return id_; }
    friend bool operator==(const owner &a, const owner &b) noexcept { return a.id_ == b.id_; }
    friend bool operator!=(const owner &a, const owner &b) noexcept { return a.id_ != b.id_; }

private:
    std::uint64_t id_;
};

/* ---------------------------------------------------------------------------------- */
/* Client                                                                              */
/* ---------------------------------------------------------------------------------- */

/* One event of the watchdog (crd_event); the views are valid only during the handler. */
struct event {
    crd_event_kind kind;                /* CRD_EVENT_LOCK_LOST, _RENEWAL_FAILING, ... */
    std::string_view name;              /* the lock's name (binary-safe) */
    std::uint64_t owner;                /* the owner whose hold it is */
    std::chrono::milliseconds validity; /* how long the hold may still be trusted */
    std::error_code status;             /* why: errc::io, errc::lock_lost, ... */
    std::string_view detail;            /* the server's or the connection's words */
};

/* The client's settings: crd_options itself (every field as documented in
 * <credisson.h>, filled with crd_options_init's defaults; strings are borrowed until
 * the client is made, which copies them), plus two handlers in C++ form. */
struct options : crd_options {
    options() noexcept : crd_options() { crd_options_init(this); }
    explicit options(const char *redis_url) noexcept : options() { url = redis_url; }

    /* Watchdog events (lock lost, renewal failing and recovered). Runs on the client's
     * watchdog thread (on the loop's thread inside crd_loop_dispatch with
     * events_on_loop); must return quickly and must not call into the same client.
     * When set it takes crd_options::on_event's place. */
    std::function<void(const event &)> handle_event;
    /* Log lines (crd_log_fn): on the thread where they happen; the same rules. When set
     * it takes crd_options::on_log's place. */
    std::function<void(crd_log_level, std::string_view)> handle_log;
};

/* A connected client (crd_client): a pool of connections to Redis, its subscriber and
 * watchdog threads. Move-only; the destructor is crd_client_free (blocked waiters are
 * woken with errc::closed, held locks expire after their lease unless release_on_close). */
class client {
public:
    /* Connect to a URL (redis://, rediss://, redis-cluster://, redis-sentinel://,
     * unix://; see crd_options::url). Throws credisson::error with the reason. */
    explicit client(const std::string &url) : client(options(url.c_str())) {}
    explicit client(const options &opts)
    {
        std::error_code ec;
        open(opts, ec);
        if (ec) {
            std::string detail = last_error_message();
            crd_client_free(c_);
            c_ = nullptr;
            throw error(ec, detail.empty() ? std::string("crd_client_new") : detail);
        }
    }
    /* The same without exceptions: on failure ec is set and the object is a failed client
     * whose last_error_message() says why and on which every call fails (errc::closed). */
    client(const options &opts, std::error_code &ec) noexcept { open(opts, ec); }

    client(client &&other) noexcept
        : c_(std::exchange(other.c_, nullptr)), handlers_(std::move(other.handlers_))
    {
    }
    client &operator=(client &&other) noexcept
    {
        if (this != &other) {
            close();
            c_ = std::exchange(other.c_, nullptr);
            handlers_ = std::move(other.handlers_);
        }
        return *this;
    }
    client(const client &) = delete;
    client &operator=(const client &) = delete;
    ~client() { close(); }

    /* crd_client_free now (see the destructor). Objects of the client may then only be
     * destroyed. Safe to call twice. */
    void close() noexcept
    {
        crd_client_free(c_);
        c_ = nullptr;
        handlers_.reset();
    }

    /* The C handle, for the parts of <credisson.h> this header does not wrap (the
     * event-loop API, multi-locks, metrics in the Prometheus format). */
    crd_client *native_handle() const noexcept { return c_; }
    /* The client's UUID, the first part of every owner field it writes. */
    std::string_view id() const noexcept
    {
        const char *s = crd_client_id(c_);
        return s != nullptr ? std::string_view(s) : std::string_view();
    }
    /* The detail of the calling thread's last failed call on this client
     * (crd_client_errmsg): valid until that thread's next call. */
    const char *last_error_message() const noexcept { return crd_client_errmsg(c_); }

    /* A snapshot of the client's counters (crd_client_metrics). */
    crd_metrics metrics() const
    {
        crd_metrics m{};
        detail::check(crd_client_metrics(c_, &m, sizeof m), c_, "crd_client_metrics");
        return m;
    }

private:
    struct handlers {
        std::function<void(const event &)> on_event;
        std::function<void(crd_log_level, std::string_view)> on_log;
    };

    static void on_event_trampoline(void *user, const crd_event *ev) noexcept
    {
        const auto *h = static_cast<const handlers *>(user);
        event e{ev->kind,
                std::string_view(ev->name, ev->name_len),
                ev->owner,
                detail::ms(ev->validity_ms),
                to_error_code(ev->status),
                ev->detail != nullptr ? std::string_view(ev->detail) : std::string_view()};
        h->on_event(e);
    }

    static void on_log_trampoline(void *user, crd_log_level level, const char *message) noexcept
    {
        const auto *h = static_cast<const handlers *>(user);
        h->on_log(level, message != nullptr ? std::string_view(message) : std::string_view());
    }

    void open(const options &opts, std::error_code &ec) noexcept
    {
        crd_options o = opts;
        if (opts.handle_event || opts.handle_log) {
            try {
                handlers_.reset(new handlers{opts.handle_event, opts.handle_log});
            } catch (...) {
                ec = make_error_code(errc::no_memory);
                return;
            }
            if (handlers_->on_event) {
                o.on_event = &client::on_event_trampoline;
                o.event_user_data = handlers_.get();
            }
            if (handlers_->on_log) {
                o.on_log = &client::on_log_trampoline;
                o.log_user_data = handlers_.get();
            }
        }
        detail::set(ec, crd_client_new(&o, &c_));
    }

    crd_client *c_ = nullptr;
    std::unique_ptr<handlers> handlers_;
};

/* ---------------------------------------------------------------------------------- */
/* Locks                                                                               */
/* ---------------------------------------------------------------------------------- */

/* The operations of one lock for one owner, without owning the C handle: what every lock
 * type is, and what with_owner() and read_write_lock::reader()/writer() return. Copies
 * are cheap and refer to the same lock; the object it came from must outlive it.
 * Lockable and TimedLockable; see the file's head for owners and errors. */
class lock_view {
public:
    lock_view() noexcept = default;
    /* Over a C handle of client c; owner 0 means the calling thread. */
    lock_view(crd_lock *l, crd_client *c, std::uint64_t owner_id = 0,
              std::chrono::milliseconds lease = watchdog) noexcept
        : l_(l), c_(c), owner_(owner_id), lease_(lease)
    {
    }

    /* The same lock for an explicit owner (see the file's head). */
    lock_view with_owner(const owner &o) const noexcept { return lock_view(l_, c_, o.id(), lease_); }
    /* The same lock taken with another lease by lock() and the try_lock family:
     * credisson::watchdog (the default) or a fixed lease > 0, as crd_lock_acquire's
     * lease_ms. */
    lock_view with_lease(std::chrono::milliseconds lease) const noexcept
    {
        return lock_view(l_, c_, owner_, lease);
    }
    /* The owner this view locks for: 0 for the calling thread. */
    std::uint64_t owner_id() const noexcept { return owner_; }
    std::chrono::milliseconds lease() const noexcept { return lease_; }
    crd_lock *native_handle() const noexcept { return l_; }
    crd_client *client_handle() const noexcept { return c_; }

    /* The lock's name (binary-safe). */
    std::string_view name() const noexcept
    {
        size_t len = 0;
        const char *p = crd_lock_name(l_, &len);
        return p != nullptr ? std::string_view(p, len) : std::string_view();
    }

    /* --- Lockable, TimedLockable ------------------------------------------------- */

    /* Wait as long as it takes (crd_lock_acquire, CRD_WAIT_FOREVER). Throws
     * credisson::error on a failure (errc::closed when the client shuts down). */
    void lock() { detail::check(attempt(CRD_WAIT_FOREVER), c_, "crd_lock_acquire"); }
    void lock(std::error_code &ec) noexcept { detail::set(ec, attempt(CRD_WAIT_FOREVER)); }

    /* Try once (wait 0): false when another owner holds it. Throws on a failure. */
    bool try_lock() { return detail::acquired_or_throw(attempt(0), c_, "crd_lock_acquire"); }
    bool try_lock(std::error_code &ec) noexcept { return detail::acquired(ec, attempt(0)); }

    /* Wait at most d (rounded up to milliseconds; zero or less tries once): false when
     * the wait ran out. Throws on a failure; nothing is held then. */
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period> &d)
    {
        return detail::acquired_or_throw(attempt(detail::wait_ms(d)), c_, "crd_lock_acquire");
    }
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period> &d, std::error_code &ec) noexcept
    {
        return detail::acquired(ec, attempt(detail::wait_ms(d)));
    }
    /* Wait until t (on t's clock, read once; the library waits on the monotonic clock). */
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration> &t)
    {
        return detail::acquired_or_throw(attempt(detail::until_ms(t)), c_, "crd_lock_acquire");
    }
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration> &t,
                        std::error_code &ec) noexcept
    {
        return detail::acquired(ec, attempt(detail::until_ms(t)));
    }

    /* Release one hold (crd_lock_release). Never throws (lock guards call it from their
     * destructors): a failure, errc::lock_lost above all (the hold ended before this
     * release: the critical section may have overlapped another holder's), goes to
     * credisson::last_error(). */
    void unlock() noexcept { detail::record(give_back()); }
    /* The same, the status in ec: errc::lock_lost, errc::not_owner, errc::io, ... */
    void unlock(std::error_code &ec) noexcept { detail::set(ec, give_back()); }

    /* --- beyond the standard --------------------------------------------------------- */

    /* crd_lock_acquire with a wait and a lease of your choice: true when acquired, false
     * for busy (wait 0) or a wait that ran out (ec clear), false with ec set on a
     * failure. wait: std::chrono::milliseconds(-1) waits as long as it takes. */
    bool acquire(std::chrono::milliseconds wait, std::chrono::milliseconds lease,
                 std::error_code &ec) noexcept
    {
        return detail::acquired(ec, call_acquire(detail::lease_ms(wait), detail::lease_ms(lease)));
    }

    /* Whether anyone, of any client or language, holds it (crd_lock_is_locked). */
    bool is_locked() const
    {
        bool v = false;
        detail::check(crd_lock_is_locked(l_, &v), c_, "crd_lock_is_locked");
        return v;
    }
    bool is_locked(std::error_code &ec) const noexcept
    {
        bool v = false;
        detail::set(ec, crd_lock_is_locked(l_, &v));
        return v;
    }
    /* Whether this view's owner holds it (crd_lock_is_held, asked of Redis). */
    bool is_held() const
    {
        bool v = false;
        detail::check(owner_ != 0 ? crd_lock_is_held_owner(l_, owner_, &v) : crd_lock_is_held(l_, &v),
                      c_, "crd_lock_is_held");
        return v;
    }
    bool is_held(std::error_code &ec) const noexcept
    {
        bool v = false;
        detail::set(ec, owner_ != 0 ? crd_lock_is_held_owner(l_, owner_, &v) : crd_lock_is_held(l_, &v));
        return v;
    }
    /* This owner's hold count (0 when it holds nothing). */
    std::int64_t hold_count() const
    {
        std::int64_t n = 0;
        detail::check(owner_ != 0 ? crd_lock_hold_count_owner(l_, owner_, &n) : crd_lock_hold_count(l_, &n),
                      c_, "crd_lock_hold_count");
        return n;
    }
    std::int64_t hold_count(std::error_code &ec) const noexcept
    {
        std::int64_t n = 0;
        detail::set(ec, owner_ != 0 ? crd_lock_hold_count_owner(l_, owner_, &n)
                                    : crd_lock_hold_count(l_, &n));
        return n;
    }
    /* The lock key's TTL (crd_lock_remaining_ttl): -2 ms when not locked, -1 ms
     * without a TTL. */
    std::chrono::milliseconds remaining_ttl() const
    {
        std::int64_t v = 0;
        detail::check(crd_lock_remaining_ttl(l_, &v), c_, "crd_lock_remaining_ttl");
        return detail::ms(v);
    }
    /* How long this owner may still trust its hold, from local bookkeeping only
     * (crd_lock_validity_ms). ec: errc::lock_lost when the hold is known lost,
     * errc::not_owner when this client records no hold; 0 ms then. */
    std::chrono::milliseconds validity(std::error_code &ec) const noexcept
    {
        std::int64_t v = 0;
        detail::set(ec, owner_ != 0 ? crd_lock_validity_ms_owner(l_, owner_, &v)
                                    : crd_lock_validity_ms(l_, &v));
        return detail::ms(v);
    }
    std::chrono::milliseconds validity() const noexcept
    {
        std::error_code ec;
        return validity(ec);
    }
    /* Whether this owner's hold is known lost (expired or removed by someone else while
     * this client still recorded it): the checkable state of a lost lock. */
    bool lost() const noexcept
    {
        std::error_code ec;
        validity(ec);
        return ec == errc::lock_lost;
    }
    /* Set the hold's lease to lease from now (crd_lock_extend). */
    void extend(std::chrono::milliseconds lease)
    {
        detail::check(call_extend(detail::lease_ms(lease)), c_, "crd_lock_extend");
    }
    void extend(std::chrono::milliseconds lease, std::error_code &ec) noexcept
    {
        detail::set(ec, call_extend(detail::lease_ms(lease)));
    }
    /* Delete the lock whoever holds it (crd_lock_force_unlock): whether one was
     * deleted. */
    bool force_unlock()
    {
        bool was = false;
        detail::check(crd_lock_force_unlock(l_, &was), c_, "crd_lock_force_unlock");
        return was;
    }
    bool force_unlock(std::error_code &ec) noexcept
    {
        bool was = false;
        detail::set(ec, crd_lock_force_unlock(l_, &was));
        return was;
    }

protected:
    crd_status attempt(std::int64_t wait) noexcept
    {
        return call_acquire(wait, detail::lease_ms(lease_));
    }
    crd_status call_acquire(std::int64_t wait, std::int64_t lease) noexcept
    {
        return owner_ != 0 ? crd_lock_acquire_owner(l_, owner_, wait, lease)
                           : crd_lock_acquire(l_, wait, lease);
    }
    crd_status give_back() noexcept
    {
        return owner_ != 0 ? crd_lock_release_owner(l_, owner_) : crd_lock_release(l_);
    }
    crd_status call_extend(std::int64_t lease) noexcept
    {
        return owner_ != 0 ? crd_lock_extend_owner(l_, owner_, lease) : crd_lock_extend(l_, lease);
    }

    crd_lock *l_ = nullptr;
    crd_client *c_ = nullptr;
    std::uint64_t owner_ = 0;
    std::chrono::milliseconds lease_ = watchdog;
};

namespace detail {
using lock_new_fn = crd_status (*)(crd_client *, const char *, size_t, crd_lock **);

/* The owning part of the lock types: the C handle, freed by the destructor. */
class owned_lock : public lock_view {
public:
    owned_lock(owned_lock &&other) noexcept : lock_view(other) { other.l_ = nullptr; }
    owned_lock &operator=(owned_lock &&other) noexcept
    {
        if (this != &other) {
            crd_lock_free(l_);
            lock_view::operator=(other);
            other.l_ = nullptr;
        }
        return *this;
    }
    owned_lock(const owned_lock &) = delete;
    owned_lock &operator=(const owned_lock &) = delete;
    /* crd_lock_free: holds stay held (see the file's head). */
    ~owned_lock() { crd_lock_free(l_); }

    /* This lock as a plain view (the calling thread's owner, this lease). */
    lock_view view() const noexcept { return *this; }

protected:
    owned_lock(lock_new_fn fn, client &c, std::string_view name, const char *what)
        : lock_view(nullptr, c.native_handle())
    {
        detail::check(fn(c_, name.data(), name.size(), &l_), c_, what);
    }
    owned_lock(lock_new_fn fn, client &c, std::string_view name, std::error_code &ec) noexcept
        : lock_view(nullptr, c.native_handle())
    {
        detail::set(ec, fn(c_, name.data(), name.size(), &l_));
    }
};

/* A lock type made by New (the C call named What in an exception): its two constructors. */
template <lock_new_fn New, const char *What>
class named_lock : public owned_lock {
public:
    named_lock(client &c, std::string_view name) : owned_lock(New, c, name, What) {}
    named_lock(client &c, std::string_view name, std::error_code &ec) noexcept
        : owned_lock(New, c, name, ec)
    {
    }
};
inline constexpr char lock_new_what[] = "crd_lock_new";
inline constexpr char fair_lock_new_what[] = "crd_fair_lock_new";
inline constexpr char fenced_lock_new_what[] = "crd_fenced_lock_new";
} // namespace detail

/* A reentrant lock (crd_lock_new; Redisson's RLock, getLock(name)). (Not called
 * "lock": a class of that name could not have a member lock(), which Lockable needs.) */
class reentrant_lock : public detail::named_lock<&crd_lock_new_n, detail::lock_new_what> {
public:
    /* A handle on the lock named name (no Redis traffic). Throws credisson::error
     * (errc::invalid_argument for an empty, too long or unsafe name); the error_code form
     * does not throw. */
    using named_lock::named_lock;
};

/* A fair lock (crd_fair_lock_new; Redisson's RFairLock): first come, first served across
 * processes and languages. Everything else as reentrant_lock. */
class fair_lock : public detail::named_lock<&crd_fair_lock_new_n, detail::fair_lock_new_what> {
public:
    using named_lock::named_lock;
};

/* A fenced lock (crd_fenced_lock_new; Redisson's RFencedLock): every acquire draws a
 * fencing token larger than any before it. lock() and the try_lock family draw one
 * without returning it, as Java's lock() does. */
class fenced_lock
    : public detail::named_lock<&crd_fenced_lock_new_n, detail::fenced_lock_new_what> {
public:
    using named_lock::named_lock;

    /* Wait as long as it takes and return this acquire's token (lockAndGetToken). */
    std::int64_t lock_token()
    {
        std::int64_t t = 0;
        detail::check(acquire_token(CRD_WAIT_FOREVER, &t), c_, "crd_lock_acquire_token");
        return t;
    }
    /* Wait at most d: the token, or std::nullopt when the wait ran out. */
    template <class Rep, class Period>
    std::optional<std::int64_t> try_lock_token_for(const std::chrono::duration<Rep, Period> &d)
    {
        std::int64_t t = 0;
        if (!detail::acquired_or_throw(acquire_token(detail::wait_ms(d), &t), c_, "crd_lock_acquire_token"))
            return std::nullopt;
        return t;
    }
    template <class Rep, class Period>
    std::optional<std::int64_t> try_lock_token_for(const std::chrono::duration<Rep, Period> &d,
                                                   std::error_code &ec) noexcept
    {
        std::int64_t t = 0;
        if (!detail::acquired(ec, acquire_token(detail::wait_ms(d), &t)))
            return std::nullopt;
        return t;
    }
    /* The counter's value: the newest token of anyone (crd_lock_token; getToken()). */
    std::int64_t token() const
    {
        std::int64_t t = 0;
        detail::check(crd_lock_token(l_, &t), c_, "crd_lock_token");
        return t;
    }
    std::int64_t token(std::error_code &ec) const noexcept
    {
        std::int64_t t = 0;
        detail::set(ec, crd_lock_token(l_, &t));
        return t;
    }

private:
    crd_status acquire_token(std::int64_t wait, std::int64_t *t) noexcept
    {
        std::int64_t lease = detail::lease_ms(lease_);
        return owner_ != 0 ? crd_lock_acquire_token_owner(l_, owner_, wait, lease, t)
                           : crd_lock_acquire_token(l_, wait, lease, t);
    }
};

namespace detail {

/* The owner of one C handle of type T that New makes from a client and a name and Free
 * frees: a throwing constructor (what names the call in the exception) and one with an
 * error_code, moves, no copies. The read-write lock and the synchronizers are these with their members. */
template <class T, crd_status (*New)(crd_client *, const char *, size_t, T **), void (*Free)(T *)>
class named_handle {
public:
    named_handle(client &c, std::string_view name, const char *what) : c_(c.native_handle())
    {
        check(New(c_, name.data(), name.size(), &h_), c_, what);
    }
    named_handle(client &c, std::string_view name, std::error_code &ec) noexcept
        : c_(c.native_handle())
    {
        set(ec, New(c_, name.data(), name.size(), &h_));
    }
    named_handle(named_handle &&other) noexcept
        : h_(std::exchange(other.h_, nullptr)), c_(other.c_)
    {
    }
    named_handle &operator=(named_handle &&other) noexcept
    {
        if (this != &other) {
            Free(h_);
            h_ = std::exchange(other.h_, nullptr);
            c_ = other.c_;
        }
        return *this;
    }
    named_handle(const named_handle &) = delete;
    named_handle &operator=(const named_handle &) = delete;
    ~named_handle() { Free(h_); }

    T *native_handle() const noexcept { return h_; }

protected:
    T *h_ = nullptr;
    crd_client *c_ = nullptr;
};

} // namespace detail

/* A read-write lock (crd_rwlock_new; Redisson's RReadWriteLock): the shape of
 * std::shared_timed_mutex. lock()/try_lock*()/unlock() take the write lock,
 * lock_shared()/try_lock_shared*()/unlock_shared() the read lock, each for the calling
 * thread (reader() and writer() give views, e.g. with_owner()). A reader asking for the
 * write lock fails at once with errc::deadlock (no upgrade, as in Redisson); a writer
 * may also read (downgrade). */
class read_write_lock : public detail::named_handle<crd_rwlock, crd_rwlock_new_n, crd_rwlock_free> {
public:
    read_write_lock(client &c, std::string_view name) : named_handle(c, name, "crd_rwlock_new") {}
    read_write_lock(client &c, std::string_view name, std::error_code &ec) noexcept
        : named_handle(c, name, ec)
    {
    }

    /* The read and the write lock as views (valid while this object lives). */
    lock_view reader() const noexcept { return lock_view(crd_rwlock_read(h_), c_); }
    lock_view writer() const noexcept { return lock_view(crd_rwlock_write(h_), c_); }

    /* TimedLockable: the write lock. */
    void lock() { writer().lock(); }
    bool try_lock() { return writer().try_lock(); }
    template <class Rep, class Period> bool try_lock_for(const std::chrono::duration<Rep, Period> &d)
    {
        return writer().try_lock_for(d);
    }
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration> &t)
    {
        return writer().try_lock_until(t);
    }
    void unlock() noexcept { writer().unlock(); }

    /* SharedTimedLockable: the read lock. */
    void lock_shared() { reader().lock(); }
    bool try_lock_shared() { return reader().try_lock(); }
    template <class Rep, class Period>
    bool try_lock_shared_for(const std::chrono::duration<Rep, Period> &d)
    {
        return reader().try_lock_for(d);
    }
    template <class Clock, class Duration>
    bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration> &t)
    {
        return reader().try_lock_until(t);
    }
    void unlock_shared() noexcept { reader().unlock(); }

};

/* ---------------------------------------------------------------------------------- */
/* Semaphores and the latch                                                            */
/* ---------------------------------------------------------------------------------- */

/* A counting semaphore (crd_semaphore_new; Redisson's RSemaphore), with the members of
 * std::counting_semaphore. Permits have no owner: any thread, process or language may
 * release what another acquired. The count lives in Redis: set it once with
 * try_set_permits (the first one to call it sets it). */
class semaphore : public detail::named_handle<crd_semaphore, crd_semaphore_new_n, crd_semaphore_free> {
public:
    semaphore(client &c, std::string_view name) : named_handle(c, name, "crd_semaphore_new") {}
    semaphore(client &c, std::string_view name, std::error_code &ec) noexcept
        : named_handle(c, name, ec)
    {
    }
    /* Freed with the object: permits acquired stay acquired. */

    /* Take permits (default 1), waiting as long as it takes. Throws on a failure. */
    void acquire(std::int64_t permits = 1)
    {
        detail::check(crd_semaphore_acquire(h_, permits, CRD_WAIT_FOREVER), c_, "crd_semaphore_acquire");
    }
    void acquire(std::int64_t permits, std::error_code &ec) noexcept
    {
        detail::set(ec, crd_semaphore_acquire(h_, permits, CRD_WAIT_FOREVER));
    }
    /* Try once. noexcept, as std::counting_semaphore::try_acquire: a failure returns
     * false and goes to credisson::last_error() (try_acquire(ec) reports it instead). */
    bool try_acquire() noexcept
    {
        crd_status st = crd_semaphore_acquire(h_, 1, 0);
        if (st == CRD_BUSY) {
            detail::last_error_slot().clear();
            return false;
        }
        return detail::record(st);
    }
    bool try_acquire(std::error_code &ec) noexcept
    {
        return detail::acquired(ec, crd_semaphore_acquire(h_, 1, 0));
    }
    /* Wait at most d for permits (default 1): false when the wait ran out. */
    template <class Rep, class Period>
    bool try_acquire_for(const std::chrono::duration<Rep, Period> &d, std::int64_t permits = 1)
    {
        return detail::acquired_or_throw(crd_semaphore_acquire(h_, permits, detail::wait_ms(d)), c_,
                                         "crd_semaphore_acquire");
    }
    template <class Rep, class Period>
    bool try_acquire_for(const std::chrono::duration<Rep, Period> &d, std::int64_t permits,
                         std::error_code &ec) noexcept
    {
        return detail::acquired(ec, crd_semaphore_acquire(h_, permits, detail::wait_ms(d)));
    }
    template <class Clock, class Duration>
    bool try_acquire_until(const std::chrono::time_point<Clock, Duration> &t, std::int64_t permits = 1)
    {
        return detail::acquired_or_throw(crd_semaphore_acquire(h_, permits, detail::until_ms(t)), c_,
                                         "crd_semaphore_acquire");
    }
    /* Give update permits back (crd_semaphore_release). errc::outcome_unknown: the
     * release was sent and its reply lost (never resent). */
    void release(std::ptrdiff_t update = 1)
    {
        detail::check(crd_semaphore_release(h_, static_cast<std::int64_t>(update)), c_,
                      "crd_semaphore_release");
    }
    void release(std::ptrdiff_t update, std::error_code &ec) noexcept
    {
        detail::set(ec, crd_semaphore_release(h_, static_cast<std::int64_t>(update)));
    }

    /* Set the permits if the semaphore does not exist yet (trySetPermits; ttl 0: no
     * expiry): whether this call set them. */
    bool try_set_permits(std::int64_t permits,
                         std::chrono::milliseconds ttl = std::chrono::milliseconds(0))
    {
        bool set = false;
        detail::check(crd_semaphore_try_set_permits(h_, permits, detail::lease_ms(ttl), &set), c_,
                      "crd_semaphore_try_set_permits");
        return set;
    }
    /* The available permits (may be negative). */
    std::int64_t available() const
    {
        std::int64_t v = 0;
        detail::check(crd_semaphore_available(h_, &v), c_, "crd_semaphore_available");
        return v;
    }
    /* Add (or with a negative delta remove) permits. */
    void add_permits(std::int64_t delta)
    {
        detail::check(crd_semaphore_add_permits(h_, delta), c_, "crd_semaphore_add_permits");
    }
    /* Take every available permit: how many. */
    std::int64_t drain()
    {
        std::int64_t v = 0;
        detail::check(crd_semaphore_drain(h_, &v), c_, "crd_semaphore_drain");
        return v;
    }
};

class permit_semaphore;

/* One permit of a permit_semaphore, released by its destructor unless it was released
 * (or given away with release_ownership()) before. Move-only. */
class permit {
public:
    permit() noexcept = default;
    permit(permit &&other) noexcept : s_(std::exchange(other.s_, nullptr)), c_(other.c_)
    {
        std::char_traits<char>::copy(id_, other.id_, sizeof id_);
    }
    permit &operator=(permit &&other) noexcept
    {
        if (this != &other) {
            reset();
            s_ = std::exchange(other.s_, nullptr);
            c_ = other.c_;
            std::char_traits<char>::copy(id_, other.id_, sizeof id_);
        }
        return *this;
    }
    permit(const permit &) = delete;
    permit &operator=(const permit &) = delete;
    /* Releases the permit if still held; a failure goes to credisson::last_error(). */
    ~permit() { reset(); }

    /* Whether this object still holds its permit. */
    explicit operator bool() const noexcept { return s_ != nullptr; }
    /* The permit's id: 32 hex characters, as Java prints it. */
    std::string_view id() const noexcept { return std::string_view(id_); }

    /* Give it back (crd_permit_semaphore_release). errc::lock_lost: released, but its
     * lease had already run out. The object holds nothing afterwards, whatever the
     * outcome. */
    void release()
    {
        crd_status st = crd_permit_semaphore_release(std::exchange(s_, nullptr), id_);
        detail::check(st, c_, "crd_permit_semaphore_release");
    }
    void release(std::error_code &ec) noexcept
    {
        detail::set(ec, crd_permit_semaphore_release(std::exchange(s_, nullptr), id_));
    }
    /* Keep the permit out without releasing it (it expires at its lease). */
    void release_ownership() noexcept { s_ = nullptr; }
    /* Set its lease to lease from now (crd_permit_semaphore_update_lease). */
    void update_lease(std::chrono::milliseconds lease)
    {
        detail::check(crd_permit_semaphore_update_lease(s_, id_, detail::lease_ms(lease)), c_,
                      "crd_permit_semaphore_update_lease");
    }
    /* The time left on its lease, -1 ms without one (crd_permit_semaphore_lease_left). */
    std::chrono::milliseconds lease_left() const
    {
        std::int64_t v = 0;
        detail::check(crd_permit_semaphore_lease_left(s_, id_, &v), c_, "crd_permit_semaphore_lease_left");
        return detail::ms(v);
    }

private:
    friend class permit_semaphore;
    void reset() noexcept
    {
        if (s_ != nullptr)
            detail::record(crd_permit_semaphore_release(std::exchange(s_, nullptr), id_));
    }

    crd_permit_semaphore *s_ = nullptr;
    crd_client *c_ = nullptr;
    char id_[CRD_PERMIT_ID_SIZE] = {};
};

/* A semaphore whose permits have ids and leases (crd_permit_semaphore_new; Redisson's
 * RPermitExpirableSemaphore). Acquires return a permit object. */
class permit_semaphore : public detail::named_handle<crd_permit_semaphore, crd_permit_semaphore_new_n, crd_permit_semaphore_free> {
public:
    permit_semaphore(client &c, std::string_view name) : named_handle(c, name, "crd_permit_semaphore_new") {}
    permit_semaphore(client &c, std::string_view name, std::error_code &ec) noexcept
        : named_handle(c, name, ec)
    {
    }
    /* Freed with the object: permits out stay out (a permit object must not outlive its
     * semaphore). */

    /* Take one permit, waiting as long as it takes; lease: credisson::no_lease or > 0. */
    permit acquire(std::chrono::milliseconds lease = no_lease)
    {
        permit p;
        detail::check(crd_permit_semaphore_acquire(h_, CRD_WAIT_FOREVER, detail::lease_ms(lease), p.id_), c_,
                      "crd_permit_semaphore_acquire");
        p.s_ = h_;
        p.c_ = c_;
        return p;
    }
    /* Wait at most d: the permit, or std::nullopt when the wait ran out. */
    template <class Rep, class Period>
    std::optional<permit> try_acquire_for(const std::chrono::duration<Rep, Period> &d,
                                          std::chrono::milliseconds lease = no_lease)
    {
        permit p;
        crd_status st = crd_permit_semaphore_acquire(h_, detail::wait_ms(d), detail::lease_ms(lease), p.id_);
        if (!detail::acquired_or_throw(st, c_, "crd_permit_semaphore_acquire"))
            return std::nullopt;
        p.s_ = h_;
        p.c_ = c_;
        return std::optional<permit>(std::move(p));
    }
    template <class Rep, class Period>
    std::optional<permit> try_acquire_for(const std::chrono::duration<Rep, Period> &d,
                                          std::chrono::milliseconds lease, std::error_code &ec) noexcept
    {
        permit p;
        crd_status st = crd_permit_semaphore_acquire(h_, detail::wait_ms(d), detail::lease_ms(lease), p.id_);
        if (!detail::acquired(ec, st))
            return std::nullopt;
        p.s_ = h_;
        p.c_ = c_;
        return std::optional<permit>(std::move(p));
    }

    bool try_set_permits(std::int64_t permits)
    {
        bool set = false;
        detail::check(crd_permit_semaphore_try_set_permits(h_, permits, &set), c_,
                      "crd_permit_semaphore_try_set_permits");
        return set;
    }
    void set_permits(std::int64_t permits)
    {
        detail::check(crd_permit_semaphore_set_permits(h_, permits), c_, "crd_permit_semaphore_set_permits");
    }
    void add_permits(std::int64_t delta)
    {
        detail::check(crd_permit_semaphore_add_permits(h_, delta), c_, "crd_permit_semaphore_add_permits");
    }
    /* Available permits, all permits (available + out), permits out. */
    std::int64_t available() const { return count(&crd_permit_semaphore_available, "available"); }
    std::int64_t permits() const { return count(&crd_permit_semaphore_permits, "permits"); }
    std::int64_t acquired() const { return count(&crd_permit_semaphore_acquired, "acquired"); }

private:
    std::int64_t count(crd_status (*fn)(crd_permit_semaphore *, std::int64_t *), const char *what) const
    {
        std::int64_t v = 0;
        detail::check(fn(h_, &v), c_, what);
        return v;
    }
};

/* A count-down latch (crd_latch_new; Redisson's RCountDownLatch), with the members of
 * std::latch. The count lives in Redis: set it with try_set_count (only when the latch
 * does not exist, i.e. is at zero). */
class latch : public detail::named_handle<crd_latch, crd_latch_new_n, crd_latch_free> {
public:
    latch(client &c, std::string_view name) : named_handle(c, name, "crd_latch_new") {}
    latch(client &c, std::string_view name, std::error_code &ec) noexcept
        : named_handle(c, name, ec)
    {
    }

    /* Lower the count by one (crd_latch_count_down; Redis decrements by one per call,
     * so there is no count_down(n)). errc::outcome_unknown: sent, reply lost. */
    void count_down() { detail::check(crd_latch_count_down(h_), c_, "crd_latch_count_down"); }
    void count_down(std::error_code &ec) noexcept { detail::set(ec, crd_latch_count_down(h_)); }
    /* Whether the count is zero, checked once. noexcept, as std::latch::try_wait: a
     * failure returns false and goes to credisson::last_error(). */
    bool try_wait() const noexcept
    {
        crd_status st = crd_latch_await(h_, 0);
        if (st == CRD_BUSY) {
            detail::last_error_slot().clear();
            return false;
        }
        return detail::record(st);
    }
    bool try_wait(std::error_code &ec) const noexcept { return detail::acquired(ec, crd_latch_await(h_, 0)); }
    /* Wait until the count is zero. */
    void wait() const { detail::check(crd_latch_await(h_, CRD_WAIT_FOREVER), c_, "crd_latch_await"); }
    void wait(std::error_code &ec) const noexcept { detail::set(ec, crd_latch_await(h_, CRD_WAIT_FOREVER)); }
    /* Wait at most d: false when it ran out first. */
    template <class Rep, class Period> bool wait_for(const std::chrono::duration<Rep, Period> &d) const
    {
        return detail::acquired_or_throw(crd_latch_await(h_, detail::wait_ms(d)), c_, "crd_latch_await");
    }
    template <class Rep, class Period>
    bool wait_for(const std::chrono::duration<Rep, Period> &d, std::error_code &ec) const noexcept
    {
        return detail::acquired(ec, crd_latch_await(h_, detail::wait_ms(d)));
    }
    template <class Clock, class Duration>
    bool wait_until(const std::chrono::time_point<Clock, Duration> &t) const
    {
        return detail::acquired_or_throw(crd_latch_await(h_, detail::until_ms(t)), c_, "crd_latch_await");
    }
    /* count_down(), then wait(). */
    void arrive_and_wait()
    {
        count_down();
        wait();
    }

    /* Set the count (>= 1) if the latch does not exist: whether this call set it. */
    bool try_set_count(std::int64_t count)
    {
        bool set = false;
        detail::check(crd_latch_try_set_count(h_, count, &set), c_, "crd_latch_try_set_count");
        return set;
    }
    /* The count (0 when the latch does not exist). */
    std::int64_t count() const
    {
        std::int64_t v = 0;
        detail::check(crd_latch_count(h_, &v), c_, "crd_latch_count");
        return v;
    }
    /* Delete it whatever its count, waking its waiters: whether there was one. */
    bool remove()
    {
        bool deleted = false;
        detail::check(crd_latch_delete(h_, &deleted), c_, "crd_latch_delete");
        return deleted;
    }
};

} // namespace credisson

#endif /* CREDISSON_HPP */
