-- fair_acquire_failed: a fair waiter gives up (timed out, cancelled, client closing):
-- remove it from the queue and move everyone behind it up by its wait (PROTOCOL.md 8.6).
-- If the lock is free, the new head is woken so a turn handed to this waiter is passed
-- on instead of lost (an addition to Redisson's cleanup; it only publishes when free).
-- KEYS[1]  queue redisson_lock_queue:{N}
-- KEYS[2]  deadlines redisson_lock_timeout:{N}
-- KEYS[3]  lock hash N
-- KEYS[4]  channel base redisson_lock__channel:{N} (a waiter's channel is base:<field>)
-- ARGV[1]  owner field of the leaver
-- ARGV[2]  the leaver's wait in ms, as used when it joined
-- ARGV[3]  publish command, PUBLISH or SPUBLISH
-- Returns  nil
local queue = redis.call('lrange', KEYS[1], 0, -1)
local found = false
for i = 1, #queue do
    if found then
        redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[i])
    end
    if queue[i] == ARGV[1] then
        found = true
    end
end
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('lrem', KEYS[1], 0, ARGV[1])
if found and redis.call('exists', KEYS[3]) == 0 then
    local head = redis.call('lindex', KEYS[1], 0)
    if head ~= false then
        redis.call(ARGV[3], KEYS[4] .. ':' .. head, '0')
    end
end
return nil
