-- group_acquire: take every value of a Redisson grouped multi-lock (RedissonFasterMultiLock,
-- getMultiLock(group, values)) in one hash, or learn how long to wait.
-- KEYS[1]    group hash G (the group name as given, no braces added)
-- ARGV[1]    lease in ms (>= 1)
-- ARGV[2]    now: the caller's wall clock in epoch ms
-- ARGV[3]    owner field "<client-uuid>:<id>"
-- ARGV[4..]  one field per value: Redisson's HighwayHash-128 of the value's bytes, base64
--            without "==" (22 characters); each value once, in any order
-- Returns    nil      acquired (or re-entered) every value
--            integer  not acquired, nothing written: ms until the latest live expire_time
--                     of another owner among these values (its entry lapses then)
local lease, now, owner = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
-- @include group_blocker
if blocker ~= -1 then
    return blocker - now
end
-- @include group_take
return nil
