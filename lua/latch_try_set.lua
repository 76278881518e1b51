-- latch_try_set: set a count-down latch's count if it has none (Redisson's
-- RCountDownLatch.trySetCount; PROTOCOL.md 14).
-- KEYS[1]  N, a string holding the count
-- KEYS[2]  channel redisson_countdownlatch__channel__{N} (braces always added)
-- ARGV[1]  message to publish ("1")
-- ARGV[2]  the count (an integer >= 1)
-- ARGV[3]  publish command, PUBLISH or SPUBLISH
-- Returns  1  N was missing: set to ARGV[2], ARGV[1] published
--          0  N exists: nothing written, nothing published
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('set', KEYS[1], ARGV[2])
    redis.call(ARGV[3], KEYS[2], ARGV[1])
    return 1
end
return 0
