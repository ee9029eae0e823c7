"""Online RL and committee pieces: rollouts, rewards, rejection sampling, iTeC rounds."""
