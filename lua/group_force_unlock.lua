-- group_force_unlock: release the given values of a grouped multi-lock whoever holds them.
-- KEYS[1]    group hash G
-- KEYS[2]    channel redisson_lock__channel:{G}
-- ARGV[1]    message ("0")
-- ARGV[2]    publish command, PUBLISH or SPUBLISH
-- ARGV[3..]  the value fields
-- Returns    integer  the number of values that were held and are now free (their F and
--                     holder sub-fields deleted); the message is published when above 0.
--                     A value nobody holds is skipped: Redisson's script stops there with a
--                     Lua error after the deletions it made, and replies the count, which
--                     Java reads as true only when it is exactly 1.
local removed = 0
for i = 3, #ARGV do
    local f = ARGV[i]
    local holder = redis.call('hget', KEYS[1], f)
    if holder ~= false then
        removed = removed + redis.call('hdel', KEYS[1], f)
        redis.call('hdel', KEYS[1], f .. ':' .. holder .. ':expire_time')
        redis.call('hdel', KEYS[1], f .. ':' .. holder .. ':lock_count')
    end
end
if removed > 0 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
end
return removed
