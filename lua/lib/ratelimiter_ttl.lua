-- ratelimiter_ttl (included by ratelimiter_try_acquire, ratelimiter_release,
-- ratelimiter_set_rate; Redisson's rule at the end of each): with a keep-alive time, the
-- config and the mode's state keys live that long from now; without one, the state keys
-- take the config's TTL if it has one.
-- Expects  KEYS[1]            config hash N
--          local value_key    the mode's value key
--          local permits_key  the mode's permit zset
-- Leaves   nothing defined.
do
    local keep_alive = tonumber(redis.call('hget', KEYS[1], 'keepAliveTime'))
    if keep_alive ~= nil and keep_alive > 0 then
        redis.call('pexpire', KEYS[1], keep_alive)
        redis.call('pexpire', value_key, keep_alive)
        redis.call('pexpire', permits_key, keep_alive)
    else
        local ttl = redis.call('pttl', KEYS[1])
        if ttl > 0 then
            redis.call('pexpire', value_key, ttl)
            redis.call('pexpire', permits_key, ttl)
        end
    end
end
