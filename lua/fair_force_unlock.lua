-- fair_force_unlock: delete a Redisson RFairLock whoever holds it and wake the queue head
-- (PROTOCOL.md 8.5).
-- KEYS[1]  lock hash N
-- KEYS[2]  queue redisson_lock_queue:{N}
-- KEYS[3]  deadlines redisson_lock_timeout:{N}
-- KEYS[4]  channel base redisson_lock__channel:{N}
-- ARGV[1]  message ("0")
-- ARGV[2]  now: the caller's wall clock in epoch ms
-- ARGV[3]  publish command, PUBLISH or SPUBLISH
-- Returns  1  N existed and was deleted (the head, if any, woken); 0 otherwise
--          "<type>" (a string: "string", "list", "hash", ...)  N is not a lock (another
--             type, or a hash with a field that is not an owner's, or over 64 fields):
--             nothing deleted, nothing published, the queue untouched. Redisson deletes
--             whatever is there.
-- @include lock_hash_guard
local now, publish, message = ARGV[2], ARGV[3], ARGV[1]
-- @include fair_prune
if redis.call('del', KEYS[1]) == 1 then
    -- @include fair_wake_head
    return 1
end
return 0
