-- latch_delete: delete a count-down latch (Redisson's RCountDownLatch.delete).
-- KEYS[1]  N, a string holding the count
-- KEYS[2]  channel redisson_countdownlatch__channel__{N}
-- ARGV[1]  message to publish when deleted ("1")
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
-- Returns  1  N existed and was deleted, ARGV[1] published (credisson's waiters re-check)
--          0  N was missing: nothing published
if redis.call('del', KEYS[1]) == 1 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
