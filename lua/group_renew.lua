-- group_renew: the watchdog's renewal of one owner's hold on a grouped multi-lock, every
-- value in one call: each expire_time raised to now + timeout, the hash TTL raised to the
-- timeout.
-- KEYS[1]    group hash G
-- ARGV[1]    watchdog timeout in ms (>= 1)
-- ARGV[2]    now: the caller's wall clock in epoch ms
-- ARGV[3]    owner field
-- ARGV[4..]  the value fields
-- Returns    1  every value is this owner's: renewed
--            0  G is gone or a value is not this owner's: nothing written (Redisson renews
--               the values before the first lost one and then replies 0), stop renewing
if redis.call('exists', KEYS[1]) == 0 then
    return 0
end
for i = 4, #ARGV do
    if redis.call('hget', KEYS[1], ARGV[i]) ~= ARGV[3] then
        return 0
    end
end
local timeout = tonumber(ARGV[1])
local expire = timeout + tonumber(ARGV[2])
for i = 4, #ARGV do
    local field = ARGV[i] .. ':' .. ARGV[3] .. ':expire_time'
    local t = tonumber(redis.call('hget', KEYS[1], field))
    if t == nil or t < expire then
        redis.call('hset', KEYS[1], field, expire)
    end
end
if redis.call('pttl', KEYS[1]) < timeout then
    redis.call('pexpire', KEYS[1], timeout)
end
return 1
