-- semaphore_release: give permits back (Redisson's RSemaphore.release(permits)). Not
-- idempotent: never resent after a lost reply.
-- KEYS[1]  N, a string holding the available count
-- KEYS[2]  channel redisson_sc:{N}
-- ARGV[1]  permits to give back (an integer >= 1)
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
-- Returns  nil; N raised by ARGV[1] (created when missing), and the new count published
local value = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], value)
