-- group_unlock: release one hold of every value of a grouped multi-lock, idempotent per
-- request id.
-- KEYS[1]    group hash G
-- KEYS[2]    channel redisson_lock__channel:{G} (redisson_lock__channel:G when G has a '{')
-- KEYS[3]    unlock latch redisson_unlock_latch:{G}:<rid>
-- ARGV[1]    owner field
-- ARGV[2]    message ("0")
-- ARGV[3]    lease in ms: a value still held gets expire_time now + lease when lower, and
--            G this TTL when its PTTL is lower
-- ARGV[4]    publish command, PUBLISH or SPUBLISH
-- ARGV[5]    latch TTL in ms (>= 1)
-- ARGV[6]    now: the caller's wall clock in epoch ms
-- ARGV[7..]  the value fields
-- Returns    1+n  every value released: their fields deleted, the message published (n:
--                 the connections it reached, as the reentrant unlock counts them),
--                 latch = 1
--            0    one hold fewer, some values still held; latch = 0. The message is
--                 published only if some value was freed (Redisson publishes after any
--                 partial unlock).
--            nil  G missing (the message is published, as Redisson does), or a value is
--                 not held by this owner with a live entry: the values it does hold still
--                 lose one hold (freed ones published), latch = -1 if anything was written
--            -1   a replayed nil
--            a retry with the same latch replays the first result (1 for a release).
local owner, message, lease, publish = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local latch, latch_ttl, now = KEYS[3], ARGV[5], tonumber(ARGV[6])
-- @include latch_replay
if redis.call('exists', KEYS[1]) == 0 then
    redis.call(publish, KEYS[2], message)
    return nil
end
local failed, kept, freed, wrote = false, false, false, false
local expire = lease + now
for i = 7, #ARGV do
    local f = ARGV[i]
    local mine = f .. ':' .. owner
    local t = tonumber(redis.call('hget', KEYS[1], mine .. ':expire_time'))
    -- The field must name this owner too: a lapsed entry taken over by a Java client,
    -- whose cleanup leaves the old sub-fields, must not free the new holder's value.
    if t ~= nil and t >= now and redis.call('hget', KEYS[1], f) == owner then
        wrote = true
        if redis.call('hincrby', KEYS[1], mine .. ':lock_count', -1) <= 0 then
            redis.call('hdel', KEYS[1], mine .. ':expire_time')
            redis.call('hdel', KEYS[1], mine .. ':lock_count')
            redis.call('hdel', KEYS[1], f)
            freed = true
        else
            if t < expire then
                redis.call('hset', KEYS[1], mine .. ':expire_time', expire)
            end
            kept = true
        end
    else
        failed = true
    end
end
local reached = 0
if freed then
    reached = redis.call(publish, KEYS[2], message)
end
if failed then
    if wrote then
        redis.call('set', latch, '-1', 'px', latch_ttl)
    end
    return nil
end
if not kept then
    redis.call('set', latch, '1', 'px', latch_ttl)
    return 1 + reached
end
redis.call('set', latch, '0', 'px', latch_ttl)
if lease > redis.call('pttl', KEYS[1]) then
    redis.call('pexpire', KEYS[1], lease)
end
return 0
