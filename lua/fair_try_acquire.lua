-- fair_try_acquire: take a Redisson RFairLock only if free and this caller's turn; never
-- joins the queue (PROTOCOL.md 8.4). Note Redisson's argument order: now before wait.
-- KEYS[1]  lock hash N
-- KEYS[2]  queue redisson_lock_queue:{N}
-- KEYS[3]  deadlines redisson_lock_timeout:{N}
-- ARGV[1]  lease in ms
-- ARGV[2]  owner field
-- ARGV[3]  now: the caller's wall clock in epoch ms
-- ARGV[4]  wait in ms (subtracted from the remaining waiters' deadlines on success)
-- Returns  nil  acquired (or re-entered)
--          1    not acquired
local now, wait = ARGV[3], ARGV[4]
-- @include fair_prune
-- @include fair_take_free
-- @include fair_reenter
return 1
