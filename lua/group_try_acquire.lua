-- group_try_acquire: take every value of a grouped multi-lock only if none is held by
-- another owner (Redisson's tryLock() without a wait). Note Redisson's argument order: now
-- before the lease.
-- KEYS[1]    group hash G
-- ARGV[1]    now: the caller's wall clock in epoch ms
-- ARGV[2]    lease in ms (>= 1)
-- ARGV[3]    owner field
-- ARGV[4..]  the value fields (as group_acquire)
-- Returns    1  acquired (or re-entered) every value
--            0  another owner holds one of them with a live entry: nothing written
local now, lease, owner = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
-- @include group_blocker
if blocker ~= -1 then
    return 0
end
-- @include group_take
return 1
