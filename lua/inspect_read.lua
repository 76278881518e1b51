-- inspect_read: one atomic snapshot of name N as every Redisson kind stores it, for the
-- state calls (crd_state_read, crd_scan_next, crd_watch). Writes nothing. Keys of another
-- type than expected read as absent (pcall), so any key can be inspected.
-- KEYS[1]    N
-- KEYS[2]    the fair queue, list redisson_lock_queue:{N}
-- KEYS[3]    the fair deadlines, zset redisson_lock_timeout:{N}
-- KEYS[4]    the fenced token counter redisson_lock_token:{N}
-- KEYS[5]    the expirable semaphore's permits, zset {N}:timeout
-- KEYS[6]    the read-write prefix P ({N}); read hold i of field F is P:F:rwlock_timeout:i
-- ARGV[1..4] the channels: the lock's, the read-write lock's, the semaphores', the latch's
-- ARGV[5]    the most queue entries and permits listed
-- ARGV[6]    the most hash fields read (a bigger hash is nobody's lock)
-- Returns    {type, pttl, hlen, hash fields and values ({} unless a hash of at most
--            ARGV[6] fields), queue length, {entry, deadline or nil, ...} (head first),
--            token or nil, GET N or nil (a string), permits out, {id, deadline, ...} (by
--            deadline), PUBSUB NUMSUB of the four channels, PUBSUB SHARDNUMSUB of them or
--            nil (before Redis 7), {field, index, pttl, ...} of each read hold}
local most = tonumber(ARGV[5])
local kind = redis.call('type', KEYS[1])['ok']
local pttl = redis.call('pttl', KEYS[1])
local hlen = 0
local hash = {}
local rholds = {}
if kind == 'hash' then
    hlen = redis.call('hlen', KEYS[1])
    if hlen <= tonumber(ARGV[6]) then
        hash = redis.call('hgetall', KEYS[1])
        local rw = false
        for i = 1, #hash, 2 do
            if hash[i] == 'mode' then
                rw = true
            end
        end
        if rw then
            for i = 1, #hash, 2 do
                local f = hash[i]
                local c = tonumber(hash[i + 1])
                if f ~= 'mode' and c ~= nil and string.find(f, ':write$') == nil then
                    for k = 1, math.min(c, 100) do
                        local t = KEYS[6] .. ':' .. f .. ':rwlock_timeout:' .. k
                        rholds[#rholds + 1] = f
                        rholds[#rholds + 1] = k
                        rholds[#rholds + 1] = redis.call('pttl', t)
                    end
                end
            end
        end
    end
end
-- The size of key by cmd (llen, zcard); 0 when the key holds another type.
local function size(cmd, key)
    local ok, n = pcall(redis.call, cmd, key)
    return ok and n or 0
end
local qlen = size('llen', KEYS[2])
local queue = {}
if qlen > 0 then
    local entries = redis.call('lrange', KEYS[2], 0, most - 1)
    for _, e in ipairs(entries) do
        queue[#queue + 1] = e
        local okz, score = pcall(redis.call, 'zscore', KEYS[3], e)
        queue[#queue + 1] = okz and score or false
    end
end
local tok = false
local okt, t = pcall(redis.call, 'get', KEYS[4])
if okt then
    tok = t
end
local value = false
if kind == 'string' then
    value = redis.call('get', KEYS[1])
end
local pcount = size('zcard', KEYS[5])
local permits = {}
if pcount > 0 then
    permits = redis.call('zrange', KEYS[5], 0, most - 1, 'withscores')
end
local numsub = redis.call('pubsub', 'numsub', ARGV[1], ARGV[2], ARGV[3], ARGV[4])
local okn, shard = pcall(redis.call, 'pubsub', 'shardnumsub', ARGV[1], ARGV[2], ARGV[3], ARGV[4])
if not okn then
    shard = false
end
return {kind, pttl, hlen, hash, qlen, queue, tok, value, pcount, permits, numsub, shard, rholds}
