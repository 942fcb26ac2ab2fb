"""Example ConnectorV2 pieces: curiosity rewards and observation preprocessors."""
