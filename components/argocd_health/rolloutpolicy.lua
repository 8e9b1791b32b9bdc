-- Argo CD health check for lwsflow.io/RolloutPolicy (lwsflow), from the status the in-cluster
-- controller mirrors from the target's rollout annotations (controller/policy/status.py):
--
-- Degraded    condition TargetFound False: the target the policy names does not exist (phase Idle).
-- Healthy     phase Idle or Succeeded: the stable template runs on every group.
-- Suspended   phase WaitingForPromotion (a manual gate: `kubectl lwsflow promote`) or Paused.
-- Degraded    phase RolledBack, Failed or Aborted: the last release did not make it.
-- Progressing phase Progressing, or the controller has not yet observed this generation.
-- No string or math library (Argo CD's default VM opens neither): comparisons and `..` only.
local hs = {}
local st = obj.status
if st == nil or st.phase == nil then
  hs.status = "Progressing"
  hs.message = "waiting for the lwsflow controller"
  return hs
end
local gen = obj.metadata and obj.metadata.generation
if gen ~= nil and (st.observedGeneration == nil or st.observedGeneration < gen) then
  hs.status = "Progressing"
  hs.message = "the lwsflow controller has not observed generation " .. tostring(gen) .. " yet"
  return hs
end
if st.conditions ~= nil then
  for _, c in ipairs(st.conditions) do
    if c.type == "TargetFound" and c.status == "False" then
      hs.status = "Degraded"
      hs.message = "target not found: " .. tostring(c.message or "")
      return hs
    end
  end
end
local phase = st.phase
local detail = ""
if st.message ~= nil and st.message ~= "" then detail = ": " .. st.message end
local stage = ""
if st.stageText ~= nil and st.stageText ~= "" then stage = " (stage " .. st.stageText .. ")" end
if phase == "Idle" or phase == "Succeeded" then
  hs.status = "Healthy"
  hs.message = phase .. "; stable " .. tostring(st.stableRevision or "")
elseif phase == "WaitingForPromotion" or phase == "Paused" then
  hs.status = "Suspended"
  hs.message = phase .. stage .. detail
elseif phase == "RolledBack" or phase == "Failed" or phase == "Aborted" then
  hs.status = "Degraded"
  hs.message = phase .. detail
else
  hs.status = "Progressing"
  hs.message = phase .. stage .. detail
end
return hs
