-- ratelimiter_try_set_rate: configure a Redisson RRateLimiter unless it is configured
-- already (trySetRate(mode, rate, interval[, keepAliveTime])).
-- KEYS[1]  config hash N
-- ARGV[1]  rate: permits per interval (>= 1)
-- ARGV[2]  interval in ms (>= 1)
-- ARGV[3]  mode: "0" OVERALL (one budget), "1" PER_CLIENT (one budget per client id)
-- ARGV[4]  keep-alive in ms: the limiter disappears when nobody acquires for this long;
--          "0" none
-- Returns  1  configured (each field set with HSETNX; with a keep-alive, N gets it as TTL)
--          0  the mode was configured already: nothing changed (Redisson's reply is that of
--             the type field's HSETNX; a field missing from a damaged config is filled in)
redis.call('hsetnx', KEYS[1], 'rate', ARGV[1])
redis.call('hsetnx', KEYS[1], 'interval', ARGV[2])
redis.call('hsetnx', KEYS[1], 'keepAliveTime', ARGV[4])
local set = redis.call('hsetnx', KEYS[1], 'type', ARGV[3])
if set == 1 and tonumber(ARGV[4]) > 0 then
    redis.call('pexpire', KEYS[1], ARGV[4])
end
return set
