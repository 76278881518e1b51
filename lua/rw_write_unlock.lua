-- rw_write_unlock: release one write hold of a Redisson RReadWriteLock, idempotent per
-- request id (PROTOCOL.md 7.4).
-- KEYS[1]  lock hash N
-- KEYS[2]  channel redisson_rwlock:{N}
-- KEYS[3]  unlock latch redisson_unlock_latch:{N}:<rid>
-- ARGV[1]  message ("1": wake every waiter)
-- ARGV[2]  re-arm lease in ms, set when write holds remain
-- ARGV[3]  write field W
-- ARGV[4]  publish command, PUBLISH or SPUBLISH
-- ARGV[5]  latch TTL in ms
-- Returns  1+n  write lock released, latch = 1 (a replay returns 1): N deleted and ARGV[1]
--               published to n connections, or, if
--               the same owner still has read holds, mode set to "read" and ARGV[1]
--               published so blocked readers re-check (Redisson publishes nothing
--               there: quirk Q5)
--          0    write holds remain (count - 1, TTL re-armed), latch = 0
--          nil  W holds nothing here (published when N has no mode, without a latch:
--               quirk Q3)
local hash, field, lease, latch, latch_ttl = KEYS[1], ARGV[3], ARGV[2], KEYS[3], ARGV[5]
-- @include latch_replay
local mode = redis.call('hget', hash, 'mode')
if mode == false then
    redis.call(ARGV[4], KEYS[2], ARGV[1])
    return nil
end
if mode ~= 'write' or redis.call('hexists', hash, field) == 0 then
    return nil
end
-- @include hold_drop
redis.call('hdel', hash, field)
if redis.call('hlen', hash) == 1 then
    redis.call('del', hash)
else
    redis.call('hset', hash, 'mode', 'read')
end
local reached = redis.call(ARGV[4], KEYS[2], ARGV[1])
redis.call('set', latch, '1', 'px', latch_ttl)
return 1 + reached
