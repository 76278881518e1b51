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
local hash, field, lease, latch, latch_ttl = KEYS[1], ARGV[3], ARGV[2], KEYS[5], ARGV[6]
local now, publish, message = ARGV[4], ARGV[5], ARGV[1]
-- @include latch_replay
-- @include fair_prune
if redis.call('exists', hash) == 0 then
    -- @include fair_wake_head
    redis.call('set', latch, '1', 'px', latch_ttl)
    return 2
end
if redis.call('hexists', hash, field) == 0 then
    return nil
end
-- @include hold_drop
redis.call('del', hash)
redis.call('set', latch, '1', 'px', latch_ttl)
-- @include fair_wake_head
return 1
