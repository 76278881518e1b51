-- group_is_held: whether the caller holds every value of a grouped multi-lock with a live
-- entry (Redisson's isHeldByCurrentThread(), which skips the first value and so answers 1
-- for one value whenever the hash exists; this script checks every value).
-- KEYS[1]    group hash G
-- ARGV[1]    now: the caller's wall clock in epoch ms
-- ARGV[2]    owner field
-- ARGV[3..]  the value fields
-- Returns    1  every value names this owner and its expire_time is now or later
--            0  otherwise
if redis.call('exists', KEYS[1]) == 0 then
    return 0
end
local now, owner = tonumber(ARGV[1]), ARGV[2]
for i = 3, #ARGV do
    if redis.call('hget', KEYS[1], ARGV[i]) ~= owner then
        return 0
    end
    local t = tonumber(redis.call('hget', KEYS[1], ARGV[i] .. ':' .. owner .. ':expire_time'))
    if t == nil or t < now then
        return 0
    end
end
return 1
