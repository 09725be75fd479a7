
  
  -- Protected call to execute SELECT command if supported
  redis.pcall("SELECT", tonumber(ARGV[1]))


  -- Return 0 if an entry exists with a *different* lock value.
  for i, key in ipairs(KEYS) do
    if redis.call("get", key) ~= ARGV[2] then
      return 0
    end
  end

  -- Update the entry for each provided key.
  for i, key in ipairs(KEYS) do
    redis.call("set", key, ARGV[2], "PX", ARGV[3])
  end

  -- Return the number of entries updated.
  return #KEYS
