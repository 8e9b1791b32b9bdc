-- Argo CD health check for disaggregatedset.x-k8s.io/DisaggregatedSet (lwsflow).
-- Healthy exactly when lwsflow's status.ds_fully_rolled holds (one table of documents tests both):
-- status.observedGeneration == metadata.generation; for every role in spec.roles,
--   desired = role.spec.replicas (default 1) * spec.slices (default 1), and
--   desired == roleStatuses[role].replicas == readyReplicas == updatedReplicas;
-- and Available True with its observedGeneration == metadata.generation.
-- External-scaled roles take their target from a DisaggregatedSetRoleScaler, which this object does
-- not show: they are judged by the DS Available condition alone (which upstream sets only when
-- every role, External ones included, is at its target).
-- LWS v0.9.0 and v0.10.0 never write DS status (observedGeneration, roleStatuses and conditions arrived
-- on main after v0.10.0, PRs #933 / #980): against them this check stays Progressing with a message
-- saying so. This differs on purpose from lwsflow's rollout gate, which then reads the child
-- LeaderWorkerSets (status.ds_children_checks): an Argo CD health check sees only this object, so it
-- cannot; the child LeaderWorkerSets carry their own health check (leaderworkerset.lua) there.
-- No string or math library is used (Argo CD's default Lua VM does not open them).
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

local meta = obj.metadata or {}
local spec = obj.spec or {}
local status = obj.status or {}
local ann = meta.annotations or {}
local p = "rollout.lwsflow.io/"

if status.conditions ~= nil then
  for _, c in ipairs(status.conditions) do
    if c.status == "True" and (c.type == "Failed" or c.type == "Degraded") then
      hs.status = "Degraded"
      hs.message = c.type .. " (" .. tostring(c.reason) .. "): " .. tostring(c.message)
      return hs
    end
  end
end
local phase = ann[p .. "phase"]
if phase == "Failed" or phase == "RolledBack" or phase == "Aborted" then
  hs.status = "Degraded"
  hs.message = "lwsflow rollout " .. phase .. ": " .. tostring(ann[p .. "reason"] or "")
  return hs
end

if status.roleStatuses == nil or #status.roleStatuses == 0 then
  hs.status = "Progressing"
  hs.message = "no roleStatuses reported (LWS v0.10.0 does not write DisaggregatedSet status; " ..
    "check the child LeaderWorkerSets)"
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

local by_name = {}
for _, rs in ipairs(status.roleStatuses) do
  if rs.name ~= nil then by_name[rs.name] = rs end
end

local slices = count(spec.slices, 1)
local diffs = {}
local external = false
for _, role in ipairs(spec.roles or {}) do
  local rspec = role.spec or {}
  if role.scaling ~= nil and role.scaling.mode == "External" then
    external = true
  else
    local want = count(rspec.replicas, 1) * slices
    local rs = by_name[role.name]
    if rs == nil then
      table.insert(diffs, "role " .. tostring(role.name) .. ": no status")
    else
      for _, name in ipairs({"replicas", "readyReplicas", "updatedReplicas"}) do
        local have = count(rs[name], 0)
        if have ~= want then
          table.insert(diffs, "role " .. role.name .. ": " .. name .. " " .. tostring(have) ..
            " != desired " .. tostring(want))
        end
      end
    end
  end
end

local available = condition(status.conditions, "Available")
if available == nil or available.status ~= "True" then
  table.insert(diffs, "Available not True" .. (external and " (externally scaled roles)" or ""))
elseif count(available.observedGeneration, -1) ~= generation then
  table.insert(diffs, "Available not True for generation " .. tostring(generation) ..
    " (condition observedGeneration " .. tostring(available.observedGeneration) .. ")")
end

if #diffs == 0 then
  hs.status = "Healthy"
  hs.message = "all roles ready and updated"
  return hs
end

if phase == "Starting" or phase == "Running" then
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
