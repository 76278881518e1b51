-- fair_unlock: release one hold of a Redisson RFairLock and wake only the queue head,
-- idempotent per request id (PROTOCOL.md 8.5).
-- KEYS[1]  lock hash N
-- KEYS[2]  queue redisson_lock_queue:{N}
-- KEYS[3]  deadlines redisson_lock_timeout:{N}
-- KEYS[4]  channel base redisson_lock__channel:{N} (the head's channel is base:<field>)
-- KEYS[5]  unlock latch redisson_unlock_latch:{N}:<rid>
-- ARGV[1]  message ("0")
-- ARGV[2]  re-arm lease in ms, set when holds remain
-- ARGV[3]  owner field
-- ARGV[4]  now: the caller's wall clock in epoch ms
-- ARGV[5]  publish command, PUBLISH or SPUBLISH
-- ARGV[6]  latch TTL in ms
-- Returns  1    released: N deleted, the head (if any) woken, latch = 1
--          0    still held (count - 1, TTL re-armed), latch = 0
--          2    N did not exist (expired or force-unlocked): the head is woken and the
--               latch set to 1 as Redisson does, but the caller learns its hold was lost
--               (Redisson returns 1 here; credisson reports CRD_LOCK_LOST)
--          nil  this owner holds nothing
local done = redis.call('get', KEYS[5])
if done ~= false then
    return tonumber(done)
end
local now = ARGV[4]
-- @include fair_prune
if redis.call('exists', KEYS[1]) == 0 then
    local head = redis.call('lindex', KEYS[2], 0)
    if head ~= false then
        redis.call(ARGV[5], KEYS[4] .. ':' .. head, ARGV[1])
    end
    redis.call('set', KEYS[5], '1', 'px', ARGV[6])
    return 2
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local count = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if count > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[5], '0', 'px', ARGV[6])
    return 0
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[5], '1', 'px', ARGV[6])
local head = redis.call('lindex', KEYS[2], 0)
if head ~= false then
    redis.call(ARGV[5], KEYS[4] .. ':' .. head, ARGV[1])
end
return 1
