"""Space helpers (RLlib's `ray.rllib.utils.spaces`): the extra spaces FlexDict, Simplex and
Repeated (in their own modules, as in RLlib) and `space_utils`."""
