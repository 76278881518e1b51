-- group_take (included by group_acquire, group_try_acquire once group_blocker found no
-- blocker): takes or re-enters every value for the caller, as Redisson's RFasterMultiLock
-- does: F = owner, F:<owner>:expire_time raised to now + lease, F:<owner>:lock_count + 1;
-- the hash TTL is only ever raised (set to the lease when G is new).
-- credisson also clears sub-fields Redisson leaves behind, where no Java client could tell
-- the difference: a previous holder's whose entry had lapsed when it is taken over, and the
-- caller's own from a hold that lapsed (taken over since, or not renewed in time), so a new
-- hold counts from 1. Redisson adds to such a stale count, and the value then stays held
-- after its holder's last unlock.
-- Expects  KEYS[1]        group hash G
--          ARGV[4..]      the value fields
--          local now      the caller's wall clock in epoch ms (a number)
--          local lease    the lease in ms (a number)
--          local owner    the caller's owner field
--          local existed  whether G existed (group_blocker)
-- Leaves   nothing defined.
do
    local expire = lease + now
    for i = 4, #ARGV do
        local f = ARGV[i]
        local mine = f .. ':' .. owner
        if existed then
            local holder = redis.call('hget', KEYS[1], f)
            local stale = holder ~= owner
            if holder ~= false and holder ~= owner then
                -- A lapsed entry of another owner (group_blocker let it pass).
                redis.call('hdel', KEYS[1], f .. ':' .. holder .. ':expire_time',
                    f .. ':' .. holder .. ':lock_count')
            elseif holder == owner then
                local t = tonumber(redis.call('hget', KEYS[1], mine .. ':expire_time'))
                stale = t == nil or t <= now
            end
            if stale and redis.call('hexists', KEYS[1], mine .. ':lock_count') == 1 then
                redis.call('hdel', KEYS[1], mine .. ':expire_time', mine .. ':lock_count')
            end
        end
        redis.call('hset', KEYS[1], f, owner)
        local t = redis.call('hget', KEYS[1], mine .. ':expire_time')
        if t == false or tonumber(t) < expire then
            redis.call('hset', KEYS[1], mine .. ':expire_time', expire)
        end
        redis.call('hincrby', KEYS[1], mine .. ':lock_count', 1)
    end
    if existed then
        local ttl = redis.call('pttl', KEYS[1])
        if ttl > 0 and lease > ttl then
            redis.call('pexpire', KEYS[1], lease)
        end
    else
        redis.call('pexpire', KEYS[1], lease)
    end
end
