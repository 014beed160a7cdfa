export LITELLM_LOCAL_MODEL_COST_MAP=True
export DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalsite_spanjudge
export CELERY_BROKER_URL=redis://127.0.0.1:6386/0 TEST_REDIS_BROKER_URL=redis://127.0.0.1:6386/1 JUDGE_TEST_REDIS_URL=redis://127.0.0.1:6386/3
export EVALSITE_VAR_DIR=/tmp/var-spanjudge
