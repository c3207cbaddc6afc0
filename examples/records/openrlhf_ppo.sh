set -x

# The shape of OpenRLHF's examples/scripts/train_ppo_with_reward_fn.sh (dotted flags, v0.10
# on): the actor and the reference share 2 GPUs, the critic has 2 of its own, two vLLM
# engines of 2 GPUs each, rewards from a reward_func file. The GPU type is not in it:
# rlplex reads it with --set cluster.gpu=h100.
ray job submit --address="http://127.0.0.1:8265" \
   --runtime-env-json='{"working_dir": "/openrlhf"}' \
   -- python3 -m openrlhf.cli.train_ppo_ray \
   --ref.num_nodes 1 \
   --ref.num_gpus_per_node 2 \
   --critic.num_nodes 1 \
   --critic.num_gpus_per_node 2 \
   --actor.num_nodes 1 \
   --actor.num_gpus_per_node 2 \
   --vllm.num_engines 2 \
   --vllm.tensor_parallel_size 2 \
   --train.colocate_actor_ref \
   --actor.model_name_or_path OpenRLHF/Llama-3-8b-sft-mixture \
   --reward.remote_url /openrlhf/examples/python/reward_func.py \
   --train.micro_batch_size 8 \
   --rollout.micro_batch_size 16 \
   --rollout.batch_size 1024 \
   --data.max_len 2048 \
   --ds.zero_stage 3 \
   --ds.adam_offload \
   --ds.packing_samples \
   --actor.gradient_checkpointing_enable \
   --logger.wandb.key "$WANDB_TOKEN"
