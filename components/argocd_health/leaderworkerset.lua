-- Argo CD health check for leaderworkerset.x-k8s.io/LeaderWorkerSet (lwsflow).
-- Argo CD's default Lua VM opens only the base, table, package and a "safe" os (time, date)
-- libraries: no string or math library, so this script uses neither.
--
-- Healthy     exactly lwsflow's status.lws_fully_rolled (one table of documents tests both):
--             status.observedGeneration == metadata.generation,
--             spec.replicas == status.replicas == status.readyReplicas == status.updatedReplicas
--             (surge groups are counted in all three status counts, so a stage that keeps surge
--             groups, e.g. R=4 S=1 at 5/5/3, is not Healthy), Available True with its
--             observedGeneration == metadata.generation, and UpdateInProgress not True (it can stay
--             True, stale, while the last groups turn ready: lws-semantics section c).
-- Degraded    a failure condition is True (Failed, Degraded, ReplicaFailure, or Progressing=False
--             with reason ProgressDeadlineExceeded), the lwsflow rollout ended Failed / RolledBack /
--             Aborted, or a running lwsflow rollout stage passed its deadline: annotations
--             rollout.lwsflow.io/stage-started-epoch (unix seconds) + rollout.lwsflow.io/deadline-seconds.
-- Progressing anything else: the controller has not seen the spec yet, groups are starting,
--             a rollout (or a paused partition) is under way. The message names the counts that differ.
local hs = {}

local function count(v, default)
  if v == nil then return default end
  return tonumber(v) or default
end

local function condition(conditions, ctype)
  if conditions == nil then return nil end
  for _, c in ipairs(conditions) do
    if c.type == ctype then return c end
  end
  return nil
end

local function failed_condition(conditions)
  if conditions == nil then return nil end
  for _, c in ipairs(conditions) do
    if c.status == "True" and (c.type == "Failed" or c.type == "Degraded" or c.type == "ReplicaFailure") then
      return c
    end
    if c.type == "Progressing" and c.status == "False" and c.reason == "ProgressDeadlineExceeded" then
      return c
    end
  end
  return nil
end

local meta = obj.metadata or {}
local spec = obj.spec or {}
local status = obj.status
local ann = meta.annotations or {}
local p = "rollout.lwsflow.io/"
local phase = ann[p .. "phase"]

local bad = failed_condition(status and status.conditions)
if bad ~= nil then
  hs.status = "Degraded"
  hs.message = bad.type .. " (" .. tostring(bad.reason) .. "): " .. tostring(bad.message)
  return hs
end
if phase == "Failed" or phase == "RolledBack" or phase == "Aborted" then
  hs.status = "Degraded"
  hs.message = "lwsflow rollout " .. phase .. ": " .. tostring(ann[p .. "reason"] or "")
  return hs
end

if status == nil then
  hs.status = "Progressing"
  hs.message = "waiting for the LeaderWorkerSet controller to report status"
  return hs
end

local generation = count(meta.generation, 0)
local observed = count(status.observedGeneration, -1)
if observed < generation then
  hs.status = "Progressing"
  hs.message = "waiting for the controller to observe generation " .. tostring(generation) ..
    " (observed " .. tostring(observed) .. ")"
  return hs
end

local want = count(spec.replicas, 1)
local names = {"replicas", "readyReplicas", "updatedReplicas"}
local diffs = {}
for _, name in ipairs(names) do
  local have = count(status[name], 0)
  if have ~= want then
    table.insert(diffs, "status." .. name .. " " .. tostring(have) .. " != spec.replicas " .. tostring(want))
  end
end

local available = condition(status.conditions, "Available")
if available == nil or available.status ~= "True" then
  table.insert(diffs, "Available not True")
elseif count(available.observedGeneration, -1) ~= generation then
  table.insert(diffs, "Available not True for generation " .. tostring(generation) ..
    " (condition observedGeneration " .. tostring(available.observedGeneration) .. ")")
end
local updating = condition(status.conditions, "UpdateInProgress")
if updating ~= nil and updating.status == "True" then
  table.insert(diffs, "UpdateInProgress True")
end

if #diffs == 0 then
  hs.status = "Healthy"
  hs.message = "all " .. tostring(want) .. " groups ready and updated"
  return hs
end

if phase == "Starting" or phase == "Running" then  -- a running stage that stopped moving
  local started = tonumber(ann[p .. "stage-started-epoch"] or "")
  local deadline = tonumber(ann[p .. "deadline-seconds"] or "")
  if started ~= nil and deadline ~= nil and deadline > 0 and os.time() > started + deadline then
    hs.status = "Degraded"
    hs.message = "rollout stage made no progress for " .. tostring(os.time() - started) ..
      "s (deadline " .. tostring(deadline) .. "s); " .. table.concat(diffs, "; ")
    return hs
  end
end

hs.status = "Progressing"
hs.message = table.concat(diffs, "; ")
return hs
