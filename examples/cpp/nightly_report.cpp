// nightly_report.cpp -- the C++ API (include/credisson.hpp): one report at a time across a
// fleet, taken with the standard's own lock types. The same lock as
//   credisson run nightly-report -- ./report.sh                (the CLI)
//   with client.lock("nightly-report"): ...                    (Python)
//   redisson.getLock("nightly-report").lock()                  (Java)
// Usage: example_cpp_nightly_report [redis://host:port]
#include <credisson.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

int main(int argc, char **argv)
{
    using namespace std::chrono_literals;
    std::atomic<bool> lost{false};
    credisson::options opts(argc > 1 ? argv[1] : "redis://127.0.0.1:6379");
    opts.prompt_loss_detection = true; // a force-unlock by anyone is reported at once
    opts.handle_event = [&](const credisson::event &e) {
        if (e.kind == CRD_EVENT_LOCK_LOST)
            lost = true; // the watchdog's thread: record it, act on it below
    };
    try {
        credisson::client redis(opts);
        credisson::reentrant_lock report(redis, "nightly-report");

        std::unique_lock<credisson::reentrant_lock> held(report, std::defer_lock);
        if (!held.try_lock_for(10s)) {
            std::puts("another host is writing the report");
            return 0;
        }
        for (int step = 0; step < 3 && !lost && !report.lost(); step++) {
            std::printf("step %d, the lock is good for another %lld ms\n", step,
                        static_cast<long long>(report.validity().count()));
            std::this_thread::sleep_for(100ms); // the work
        }
        std::error_code ec;
        held.mutex()->unlock(ec); // the release's own status: errc::lock_lost if it was lost
        held.release();
        std::printf("released: %s\n", ec ? ec.message().c_str() : "ok");
        return ec ? 1 : 0;
    } catch (const credisson::error &e) {
        // e.code() is the C status (credisson::errc), e.what() the library's words.
        std::fprintf(stderr, "credisson: %s\n", e.what());
        return 1;
    }
}
