"""What several test folders share: modules imported by tests (e2e, sandbox_pools, scripted,
gpu_common, pipeline_config) and scripts the tests run in a child process (bf16_checks, smollm2_checks,
dist_policy_step, gpu_jobs). None of them is collected as a test."""
