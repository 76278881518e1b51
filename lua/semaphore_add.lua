-- semaphore_add: add (or, with a negative amount, remove) permits (Redisson's
-- RSemaphore.addPermits). The count may go below zero. Not idempotent.
-- KEYS[1]  N, a string holding the available count
-- KEYS[2]  channel redisson_sc:{N}
-- ARGV[1]  permits to add (an integer, may be negative)
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
-- Returns  nil; N set to its count (0 when missing) + ARGV[1], and that new count
--          published, also when it is 0 or negative
local value = redis.call('get', KEYS[1])
if value == false then
    value = 0
end
local count = tonumber(value) + tonumber(ARGV[1])
redis.call('set', KEYS[1], count)
redis.call(ARGV[2], KEYS[2], count)
