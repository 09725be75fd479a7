-- deadbolt's Lua bootstrap: turns a fresh Lua 5.1 state into Redis 7.0's scripting environment.
-- It runs once per state (again after SCRIPT FLUSH) with the Rust helpers as its argument and
-- returns the function that runs one script under the error handler.
--
-- Errors meant for the script author are raised here, in Lua, so they carry the script's
-- position exactly as Redis's do; Rust callbacks never raise (they return ok, value).
local rs = ...
local cwrap = rs.cwrap
local dbg = debug
debug = nil

local G = _G
local type, error, tostring, tonumber, select, rawget, rawset, setmetatable, next, pairs, pcall,
      loadstring =
      type, error, tostring, tonumber, select, rawget, rawset, setmetatable, next, pairs, pcall,
      loadstring
local getinfo = dbg.getinfo
local concat = table.concat
local floor = math.floor
local strbyte, strsub, strfind, strgsub, strmatch =
  string.byte, string.sub, string.find, string.gsub, string.match
local getmetatable_ = getmetatable

-- Frames of this chunk are skipped when the error handler looks for the script's position.
local INTERNAL = '=deadbolt'
local unwinding = rs.unwinding

-- The wrappers below stand in for C functions that the script calls directly, so their
-- errors must read as luaL_error's would: prefixed with the script's position (luaL_where).
local function script_where()
  local lvl = 2
  while true do
    local i = getinfo(lvl, 'Sl')
    if not i then return '' end
    if i.what ~= 'C' and i.what ~= 'tail' and i.source ~= INTERNAL then
      if i.currentline > 0 then return i.short_src .. ':' .. i.currentline .. ': ' end
      return ''
    end
    lvl = lvl + 1
  end
end
local function argerr(n, fname, msg)
  error(script_where() .. 'bad argument #' .. n .. " to '" .. fname .. "' (" .. msg .. ')', 0)
end
local function typename(n, ...)
  if select('#', ...) < n then return 'no value' end
  return type((select(n, ...)))
end
local function check_table(n, fname, ...)
  if type((select(n, ...))) ~= 'table' then
    argerr(n, fname, 'table expected, got ' .. typename(n, ...))
  end
end
-- For an original C function called through pcall by a wrapper: its luaL_error texts (which
-- then lack a position and name the function '?') are raised again as the script would
-- have seen them; any other error as it is.
local function relocate(fname, ok, ...)
  if ok then return ... end
  local e = ...
  if type(e) == 'string' then
    local n, rest = strmatch(e, "^bad argument #(%d+) to '%?' (.*)$")
    if n then error(script_where() .. 'bad argument #' .. n .. " to '" .. fname .. "' " .. rest, 0) end
    if e == 'cannot change a protected metatable' then error(script_where() .. e, 0) end
  end
  error(e, 0)
end

local RO = 'Attempt to modify a readonly table'

-- Tables the script must not modify (weak keys: proxies, _G, the string metatable).
local protected = setmetatable({}, {__mode = 'k'})

-- The first level past `lvl` (a lost tail call) that is not a lost tail call, both levels as
-- the caller counts them (one less than here). Lua 5.1 reports one stack level per tail call a
-- frame made, so a script killed in a tail-call loop has billions of them; they form one
-- contiguous run, found here with O(log n) probes instead of one per call.
local function skip_tail(lvl)
  local step = 1
  while true do
    local j = getinfo(lvl + step + 1, 'S')
    if not j or j.what ~= 'tail' then break end
    step = step * 2
  end
  local lo, hi = lvl + floor(step / 2), lvl + step
  while hi - lo > 1 do
    local mid = floor((lo + hi) / 2)
    local j = getinfo(mid + 1, 'S')
    if j and j.what == 'tail' then lo = mid else hi = mid end
  end
  return hi
end

-- Redis's __redis__err__handler, except that it looks for the first frame that belongs to the
-- script instead of a fixed level, so our Lua wrappers (redis.call, pcall) stay invisible.
local function err_handler(err)
  local lvl, src, line = 1, nil, nil
  while true do
    local i = getinfo(lvl, 'Sl')
    if not i then break end
    if i.what == 'tail' then
      lvl = skip_tail(lvl)
    elseif i.what ~= 'C' and i.source ~= INTERNAL then
      src, line = i.source, i.currentline
      break
    else
      lvl = lvl + 1
    end
  end
  -- Redis's handler fails writing the position into a read-only table (error(redis)), and
  -- the handler's own error is what the client sees; the same reply, without the write.
  if type(err) == 'table' and protected[err] then
    return {err = 'ERR err_handler_def:10: ' .. RO, source = '@err_handler_def', line = 10}
  end
  if type(err) ~= 'table' then err = {err = 'ERR ' .. tostring(err)} end
  if src then
    rawset(err, 'source', src)
    rawset(err, 'line', line)
  end
  return err
end

-- Read-only globals. PUC Lua has no read-only tables, so _G gets a guarding metatable, every
-- library is reached through an empty proxy, and the raw functions that would get around the
-- metatables refuse protected tables.
local real_of = setmetatable({}, {__mode = 'k'})

local function ro_newindex() error(RO, 2) end

local function proxy(real)
  local p = setmetatable({}, {__index = real, __newindex = ro_newindex, __metatable = false})
  real_of[p] = real
  protected[p] = true
  return p
end

local function raise(msg) error({err = msg}, 0) end

-- Lua 5.1 would load bytecode through these; crafted bytecode can corrupt the VM.
local function safe_loadstring(...)
  local s, name = ...
  local t = type(s)
  if t ~= 'string' and t ~= 'number' then
    argerr(1, 'loadstring', 'string expected, got ' .. typename(1, ...))
  end
  if type(s) == 'string' and strbyte(s, 1) == 27 then
    return nil, 'binary chunks are not allowed'
  end
  return loadstring(s, name)
end

-- Lua 5.1's load takes only a reader function (load('return 1') is an argument error in Redis
-- too); it is rebuilt here so that binary chunks are refused the same way as in loadstring.
local function safe_load(...)
  local f, name = ...
  if type(f) ~= 'function' then
    local got = select('#', ...) == 0 and 'no value' or type(f)
    error("bad argument #1 to 'load' (function expected, got " .. got .. ")", 3)
  end
  local parts = {}
  while true do
    local piece = f()
    if piece == nil or piece == '' then break end
    if type(piece) ~= 'string' then return nil, 'reader function must return a string' end
    parts[#parts + 1] = piece
  end
  return safe_loadstring(concat(parts), name or '=(load)')
end

-- A killed script must not survive by catching the kill (in a coroutine or with pcall/xpcall,
-- which are C functions in raw.rs).
coroutine.resume = rs.resume
-- Bounded versions of C loops (raw.rs, lua_match.c).
table.insert = rs.tinsert
string.rep = rs.rep
string.find, string.match, string.gsub = rs.find, rs.match, rs.gsub
string.gmatch, string.gfind = rs.gmatch, rs.gmatch

-- Redis's own rand48, so math.random gives the same sequence on every platform (7.0 does not
-- reseed per script).
local lrand, srand = rs.lrand, rs.srand
-- luaL_checkint on x86-64: the number truncated toward zero, then narrowed to a C int
-- (wrapping), so math.random(2^31) sees -2147483648 as Redis does.
local function cint(x)
  local i = x >= 0 and floor(x) or -floor(-x)
  if i ~= i or i == 1/0 or i == -1/0 then return 0 end
  i = i % 4294967296
  if i >= 2147483648 then i = i - 4294967296 end
  return i
end
local function checkint(n, v)
  local x = tonumber(v)
  if x == nil then
    local got = v == nil and 'no value' or type(v)
    -- Level 4: past this function, math.random and the C trampoline: the script's line, as
    -- luaL_error gives it.
    error("bad argument #" .. n .. " to 'random' (number expected, got " .. got .. ")", 4)
  end
  return cint(x)
end
math.random = cwrap(function(...)
  local r = lrand()
  local n = select('#', ...)
  if n == 0 then return r end
  if n == 1 then
    local u = checkint(1, (...))
    if u < 1 then error("bad argument #1 to 'random' (interval is empty)", 3) end
    return floor(r * u) + 1
  end
  if n == 2 then
    local l, u = checkint(1, (...)), checkint(2, (select(2, ...)))
    if l > u then error("bad argument #2 to 'random' (interval is empty)", 3) end
    return floor(r * (u - l + 1)) + l
  end
  error('wrong number of arguments', 3)
end)
math.randomseed = cwrap(function(...)
  if select('#', ...) == 0 or tonumber((...)) == nil then
    local v = ...
    local got = v == nil and 'no value' or type(v)
    error("bad argument #1 to 'randomseed' (number expected, got " .. got .. ")", 3)
  end
  srand(checkint(1, (...)))
end)

-- The redis table.
local redis = {}
local rcall = rs.call
-- The error of a failed call was counted in errorstats already (Redis's
-- ignore_error_stats_update): the script's error reply built from it is not counted again.
redis.call = cwrap(function(...)
  local ok, v = rcall(...)
  if ok then return v end
  error({err = v, ignore_error_stats_update = true}, 0)
end)
redis.pcall = function(...)
  local ok, v = rcall(...)
  if ok then return v end
  return {err = v, ignore_error_stats_update = true}
end

local function trim_crlf(s)
  s = strgsub(s, '^[\r\n]+', '')
  s = strgsub(s, '[\r\n]+$', '')
  return s
end

redis.error_reply = function(...)
  if select('#', ...) ~= 1 or type((...)) ~= 'string' then
    return {err = 'ERR wrong number or type of arguments'}
  end
  local s = ...
  if strsub(s, 1, 1) ~= '-' then s = '-' .. s end
  local sp = strfind(s, ' ', 1, true)
  local code, msg
  if sp then
    code, msg = strsub(s, 2, sp - 1), strsub(s, sp + 1)
  else
    code, msg = 'ERR', strsub(s, 2)
  end
  return {err = code .. ' ' .. trim_crlf(msg)}
end
redis.status_reply = function(...)
  if select('#', ...) ~= 1 or type((...)) ~= 'string' then
    return {err = 'ERR wrong number or type of arguments'}
  end
  return {ok = (...)}
end

local sha1 = rs.sha1hex
redis.sha1hex = cwrap(function(...)
  if select('#', ...) ~= 1 then raise('ERR wrong number of arguments') end
  local s = ...
  if type(s) == 'number' then s = tostring(s) elseif type(s) ~= 'string' then s = '' end
  return sha1(s)
end)

local rlog = rs.log
redis.log = cwrap(function(...)
  local n = select('#', ...)
  if n < 2 then raise('ERR redis.log() requires two arguments or more.') end
  local level = tonumber((...))
  if level == nil then raise('ERR First argument must be a number (log level).') end
  if level < 0 or level > 3 then raise('ERR Invalid debug level.') end
  local parts = {}
  for i = 2, n do
    local v = select(i, ...)
    local t = type(v)
    if t == 'string' or t == 'number' then parts[#parts + 1] = tostring(v) end
  end
  rlog(floor(level), concat(parts, ' '))
end)
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3

local setresp = rs.setresp
redis.setresp = cwrap(function(...)
  if select('#', ...) ~= 1 then raise('ERR redis.setresp() requires one argument.') end
  local v = tonumber((...)) or 0
  v = v >= 0 and floor(v) or -floor(-v)
  if v ~= 2 and v ~= 3 then raise('ERR RESP version must be 2 or 3.') end
  setresp(v)
end)

redis.set_repl = cwrap(function(...)
  if select('#', ...) ~= 1 then raise('ERR redis.set_repl() requires two arguments.') end
  local f = tonumber((...)) or 0
  if f ~= 0 and f ~= 1 and f ~= 2 and f ~= 3 then
    raise('ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.')
  end
end)
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.replicate_commands = function() return true end
redis.breakpoint = function() return false end
redis.debug = function() end

local acl_check, args_unpack = rs.acl_check, rs.unpack
redis.acl_check_cmd = cwrap(function(...)
  local n = select('#', ...)
  if n == 0 then raise('ERR Please specify at least one argument for this redis lib call') end
  local args = {}
  for i = 1, n do
    local a = (select(i, ...))
    local t = type(a)
    if t ~= 'string' and t ~= 'number' then
      raise('ERR Lua redis lib command arguments must be strings or integers')
    end
    args[i] = tostring(a)
  end
  -- Whether the script's user may run the command with these arguments (keys included).
  local allowed = acl_check(args_unpack(args, 1, n))
  if allowed == nil then
    raise('ERR Invalid command passed to redis.acl_check_cmd()')
  end
  return allowed
end)
redis.REDIS_VERSION = rs.version
redis.REDIS_VERSION_NUM = rs.version_num

-- Globals Redis 7.0 does not have (hardened as in 7.2.11 / 8.2.2: no getfenv/setfenv/newproxy).
print, loadfile, dofile, getfenv, setfenv, newproxy, require, module, package, gcinfo =
  nil, nil, nil, nil, nil, nil, nil, nil, nil, gcinfo

rawset(G, '__redis__err__handler', err_handler)
rawset(G, 'unpack', rs.unpack)
rawset(G, 'loadstring', cwrap(safe_loadstring))
rawset(G, 'load', cwrap(safe_load))
-- Redis's luaRedisPcall, in C (raw.rs).
rawset(G, 'pcall', rs.pcall)
rawset(G, 'xpcall', rs.xpcall)
rawset(G, 'rawset', cwrap(function(...)
  local t = ...
  check_table(1, 'rawset', ...)
  local n = select('#', ...)
  if n < 2 then argerr(2, 'rawset', 'value expected') end
  if n < 3 then argerr(3, 'rawset', 'value expected') end
  if protected[t] then error(RO, 0) end
  return relocate('rawset', pcall(rawset, ...))
end))
rawset(G, 'setmetatable', cwrap(function(...)
  local t = ...
  check_table(1, 'setmetatable', ...)
  if protected[t] then error(RO, 0) end
  return relocate('setmetatable', pcall(setmetatable, ...))
end))
-- Enumeration and raw reads see through the proxies (pairs(redis) lists the API).
-- The globals themselves, KEYS and ARGV included, live in `real` (see the end).
local real = rs.vars
local function next_(t, k)
  if t == G then return next(real, k) end
  return next(real_of[t] or t, k)
end
-- C functions, as Lua's next: a script's `return nx(t, k)` then keeps its own frame (Lua 5.1
-- drops the caller of a Lua function called in a tail call), so errors name its line. pairs
-- gets its own, as in Lua (pairs(t) ~= next).
local function checked_next(...)
  check_table(1, 'next', ...)
  return next_(...)
end
local pairs_next = cwrap(checked_next)
rawset(G, 'next', cwrap(checked_next))
rawset(G, 'pairs', cwrap(function(...)
  local t = ...
  check_table(1, 'pairs', ...)
  if real_of[t] or t == G then return pairs_next, t, nil end
  return pairs(t)
end))
rawset(G, 'rawget', cwrap(function(...)
  local t, k = ...
  check_table(1, 'rawget', ...)
  if select('#', ...) < 2 then argerr(2, 'rawget', 'value expected') end
  if t == G then return rawget(real, k) end
  return rawget(real_of[t] or t, k)
end))

rawset(G, 'redis', redis)
-- LuaBitOp's argument checks, with luaL_checknumber's texts at the script's position.
local rbit, bit = rs.bit, {}
local bit_arity = {tobit = 1, bnot = 1, bswap = 1, tohex = 1, lshift = 2, rshift = 2,
  arshift = 2, rol = 2, ror = 2, band = 1, bor = 1, bxor = 1}
for name, fixed in pairs(bit_arity) do
  local f = rbit[name]
  bit[name] = cwrap(function(...)
    local n = select('#', ...)
    local check = n > fixed and n or fixed
    if name == 'tohex' then check = n > 1 and 2 or 1 end
    for i = 1, check do
      local v = select(i, ...)
      if tonumber(v) == nil then
        local got = v == nil and 'no value' or type(v)
        error("bad argument #" .. i .. " to '" .. name .. "' (number expected, got " .. got .. ")", 3)
      end
    end
    return f(...)
  end)
end
rawset(G, 'bit', bit)

-- cjson: the Rust encoder/decoder behind lua-cjson's argument checks; errors are raised at
-- the script's position, as luaL_error does.
local function wrap_cjson(raw)
  local t = {}
  for k, v in pairs(raw) do t[k] = v end
  local enc, dec = raw.encode, raw.decode
  t.encode = cwrap(function(...)
    if select('#', ...) ~= 1 then error("bad argument #1 to 'encode' (expected 1 argument)", 3) end
    local out, e = enc((...))
    if e then error(e, 3) end
    return out
  end)
  t.decode = cwrap(function(...)
    if select('#', ...) ~= 1 then error("bad argument #1 to 'decode' (expected 1 argument)", 3) end
    local str = ...
    if type(str) == 'number' then
      str = tostring(str)
    elseif type(str) ~= 'string' then
      error("bad argument #1 to 'decode' (string expected, got " .. type(str) .. ")", 3)
    end
    local v, e = dec(str)
    if e then error(e, 3) end
    return v
  end)
  -- lua-cjson's json_integer_option: luaL_checkinteger narrowed to an int, then a range check.
  for name, hi in pairs({encode_max_depth = 2147483647, decode_max_depth = 2147483647,
                         encode_number_precision = 14}) do
    local f = raw[name]
    t[name] = cwrap(function(...)
      local v = ...
      if v == nil then return f() end
      local x = tonumber(v)
      if x == nil then argerr(1, name, 'number expected, got ' .. typename(1, ...)) end
      local i = cint(x)
      if i < 1 or i > hi then argerr(1, name, 'expected integer between 1 and ' .. hi) end
      return f(i)
    end)
  end
  local new = rs.cjson_new
  t.new = function() return wrap_cjson(new()) end
  return t
end
rawset(G, 'cjson', wrap_cjson(rs.cjson))

-- struct: Rust pack/unpack/size returning ok, results…; errors raised at the script's line.
local function struct_check(ok, ...)
  if not ok then error((...), 4) end
  return ...
end
local rstruct, struct = rs.struct, {}
for _, name in pairs({'pack', 'unpack', 'size'}) do
  local f = rstruct[name]
  struct[name] = cwrap(function(...) return struct_check(f(...)) end)
end
rawset(G, 'struct', struct)

-- cmsgpack: same shape as struct.
local rmp, cmsgpack = rs.cmsgpack, {}
for k, v in pairs(rmp) do cmsgpack[k] = v end
for _, name in pairs({'pack', 'unpack', 'unpack_one', 'unpack_limit'}) do
  local f = rmp[name]
  cmsgpack[name] = cwrap(function(...) return struct_check(f(...)) end)
end
rawset(G, 'cmsgpack', cmsgpack)
for _, name in pairs({'redis', 'string', 'table', 'math', 'coroutine', 'bit', 'cjson', 'struct', 'cmsgpack'}) do
  rawset(G, name, proxy(rawget(G, name)))
end

-- The string metatable: getmetatable('') hands out a read-only view that holds only __index,
-- the read-only string library, as Redis's read-only metatable does (its __metatable field
-- reads as nil, so the view is of a copy without that field).
local smt = getmetatable_('')
smt.__index = rawget(G, 'string')
smt.__metatable = proxy({__index = smt.__index})
protected[smt] = true

local function no_global(_, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end

-- _G itself is left empty: every global moves to `real`, reached through _G's __index, so that
-- any assignment to a global (existing or not, KEYS and ARGV too, which Rust's `setup` puts
-- in `real` before each run) goes through __newindex and fails, as Redis's read-only _G does.
-- A global read is one table-to-table step (_G -> real), with no function call.
for k, v in next, G do real[k] = v end
for k in next, real do rawset(G, k, nil) end
setmetatable(real, {__index = no_global})
protected[G] = true
-- getmetatable(_G) gives a read-only view, like Redis's (read-only) error metatable; the real
-- one must stay unreachable, since its __index leads to the writable `real`.
local gmt = {__index = real, __newindex = ro_newindex, __metatable = proxy({__index = no_global})}
setmetatable(G, gmt)

-- FUNCTION LOAD (function_lua.c): while a library's code runs, the globals are only `redis`
-- with register_function, log and the version; anything else is a nonexistent global, also
-- inside that `redis` (redis.call). The library's functions see the usual globals when they
-- run, since only _G's __index is switched, and only for the load.
local register = rs.register
local libredis = {
  register_function = cwrap(function(...)
    local e = register(...)
    if e then error({err = 'ERR ' .. e}, 0) end
  end),
  log = redis.log,
  LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
  REDIS_VERSION = rs.version, REDIS_VERSION_NUM = rs.version_num,
}
setmetatable(libredis, {__index = no_global})
local libapi = setmetatable({redis = proxy(libredis)}, {__index = no_global})
protected[libapi] = true
local strict_pcall = pcall
rs.compile = loadstring
-- Runs a compiled library; nil, or the error as luaExtractErrorInformation renders it.
rs.load_library = function(f)
  gmt.__index = libapi
  local ok, e = strict_pcall(f)
  gmt.__index = real
  if ok then return nil end
  if type(e) == 'string' or type(e) == 'number' then return 'ERR ' .. e end
  if type(e) == 'table' then
    local m = rawget(e, 'err')
    if type(m) == 'string' or type(m) == 'number' then return tostring(m) end
  end
  return '(null)'
end

-- The runner (raw::run, made by the engine) calls this handler: it marks the run as unwinding
-- (the busy hook then lets the handler finish instead of raising again); the global
-- __redis__err__handler can't, so a script calling it cannot make itself unkillable.
return function(e)
  unwinding()
  local r = err_handler(e)
  return r
end
