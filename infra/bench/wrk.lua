-- infra/bench/wrk.lua: the requests of the wrk runs of infra/bench/cache.py.
--   wrk ... -s infra/bench/wrk.lua URL -- rotate PREFIX LISTFILE [HEADER...]
--       GET PREFIX..line for each line of LISTFILE in turn, each thread from its own place;
--   wrk ... -s infra/bench/wrk.lua URL -- range PATH SIZE [HEADER...]
--       GET PATH with Range: a random 4 KiB-aligned 4 KiB block of its SIZE bytes.
-- HEADER is "Name: value".
local next_tid = 0
function setup(thread)
   thread:set("tid", next_tid)
   next_tid = next_tid + 1
end

local headers = {}
local reqs, i = {}, 0
local path, blocks

local function rotate()
   i = i % #reqs + 1
   return reqs[i]
end

local function range()
   local off = (math.random(blocks) - 1) * 4096
   headers["Range"] = string.format("bytes=%d-%d", off, off + 4095)
   return wrk.format("GET", path, headers)
end

function init(args)
   local mode = args[1]
   for k = 4, #args do
      local name, value = args[k]:match("^([^:]+):%s*(.*)$")
      headers[name] = value
   end
   if mode == "rotate" then
      local prefix, list = args[2], args[3]
      for line in io.lines(list) do
         if line ~= "" then
            reqs[#reqs + 1] = wrk.format("GET", prefix .. line, headers)
         end
      end
      i = ((tid or 0) * 7919) % #reqs
      request = rotate
   elseif mode == "range" then
      path = args[2]
      blocks = math.floor(tonumber(args[3]) / 4096)
      math.randomseed(os.time() * 1000 + (tid or 0) * 7919)
      request = range
   else
      error("wrk.lua: the first argument is rotate or range, not " .. tostring(mode))
   end
end

-- Replaced by init with the mode's own function (no test per request); defined here so that
-- wrk knows the script makes its own requests.
function request()
   return rotate()
end
