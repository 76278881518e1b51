-- nrfair_try_acquire: take a Redisson RNonReentrantFairLock only if free and this
-- caller's turn; never joins the queue. Redisson's argument order: now before wait.
-- KEYS[1]  lock hash N
-- KEYS[2]  queue redisson_lock_queue:{N}
-- KEYS[3]  deadlines redisson_lock_timeout:{N}
-- ARGV[1]  lease in ms
-- ARGV[2]  owner field
-- ARGV[3]  now: the caller's wall clock in epoch ms
-- ARGV[4]  wait in ms (subtracted from the remaining waiters' deadlines on success)
-- ARGV[5]  the reentry error text, "NON_REENTRANT_REACQUIRE" (Redisson's)
-- Returns  nil    acquired
--          1      not acquired
--          error  "ERR NON_REENTRANT_REACQUIRE": this owner holds it already; nothing
--                 written
local now, wait, reentry_error = ARGV[3], ARGV[4], ARGV[5]
-- @include fair_prune
-- @include fair_take_free
-- @include refuse_reentry
return 1
