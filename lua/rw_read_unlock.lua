-- rw_read_unlock: release one read hold of a Redisson RReadWriteLock, idempotent per
-- request id (PROTOCOL.md 7.2).
-- KEYS[1]  lock hash N
-- KEYS[2]  channel redisson_rwlock:{N}
-- KEYS[3]  this owner's timeout key base T (hold i is T:i)
-- KEYS[4]  key prefix P (any reader f's hold i is P:f:rwlock_timeout:i)
-- KEYS[5]  unlock latch redisson_unlock_latch:{N}:<rid>
-- ARGV[1]  message on full release ("0")
-- ARGV[2]  owner field F
-- ARGV[3]  publish command, PUBLISH or SPUBLISH
-- ARGV[4]  latch TTL in ms
-- Returns  1    N deleted (no live reader or writer left), ARGV[1] published, latch = 1
--          0    other holds remain; N's TTL set to the longest live read hold, latch = 0
--          nil  F holds no read lock here. When N has no mode at all, ARGV[1] is still
--               published (as Redisson does) but no latch is written, so a retry gets
--               the same answer (Redisson writes latch 1 here: quirk Q3).
local latch = KEYS[5]
-- @include latch_replay
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call(ARGV[3], KEYS[2], ARGV[1])
    return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return nil
end
local count = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if count == 0 then
    redis.call('hdel', KEYS[1], ARGV[2])
end
redis.call('del', KEYS[3] .. ':' .. (count + 1))
if redis.call('hlen', KEYS[1]) > 1 then
    -- Other readers are alive only if one of their timeout keys is.
    local longest = -3
    local fields = redis.call('hkeys', KEYS[1])
    for _, field in ipairs(fields) do
        local holds = tonumber(redis.call('hget', KEYS[1], field))
        if type(holds) == 'number' then
            for i = holds, 1, -1 do
                local left = redis.call('pttl', KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. i)
                longest = math.max(left, longest)
            end
        end
    end
    if longest > 0 then
        redis.call('pexpire', KEYS[1], longest)
        redis.call('set', latch, '0', 'px', ARGV[4])
        return 0
    end
    if redis.call('hget', KEYS[1], 'mode') == 'write' then
        redis.call('set', latch, '0', 'px', ARGV[4])
        return 0
    end
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], KEYS[2], ARGV[1])
redis.call('set', latch, '1', 'px', ARGV[4])
return 1
