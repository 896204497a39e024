// The entry a workflow's worker loads: the steps themselves come with each `workflow` call
// (their files are imported on first use and cached by the worker's module loader).
export default { sluiceWorkflow: true };
