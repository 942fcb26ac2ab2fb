"""The offline_data section of every AlgorithmConfig (seed 003 "Configuring RLlib Algorithms",
docs/offline.md): where experiences are read from and written to, and how RLlib's new-stack
reading through ray.data is set up."""
from __future__ import annotations

from rlx.algorithms.common_option_checks import input_evaluation
from rlx.algorithms.config_options import Option, boolean, class_or_none, dictionary, integer
from rlx.offline import options as offline_options

O = ("offline_data",)

#: The offline_data options, in the order AlgorithmConfig.offline_data() documents them.
OFFLINE_DATA_OPTIONS: list[Option] = [
    Option("input_", "sampler", O, offline_options.check_input, aliases=("input",),
           doc="Where experiences come from: 'sampler' (the envs), a directory, file, glob or list of offline "
               "files, a dict mixing sources by probability ({'sampler': 0.4, '/tmp/data': 0.6}), 'dataset' "
               "(the files in input_config), or a callable fn(ioctx) -> InputReader; see docs/offline.md."),
    Option("input_config", {}, O, offline_options.check_io_config,
           doc="Settings for reading the input: {'format': 'json' or 'parquet'} (default: by the files' "
               "extension), and 'paths' for input_='dataset'."),
    Option("actions_in_input_normalized", False, O, boolean,
           doc="The offline Box actions are already in [-1, 1] (as rlx and RLlib write them with "
               "normalize_actions=True); when False and normalize_actions is True, the reader normalizes them."),
    Option("input_evaluation", None, O, input_evaluation,
           doc="Old form of off_policy_estimation_methods: a list of 'is', 'wis', 'dm', 'dr'."),
    Option("postprocess_inputs", False, O, boolean,
           doc="Let the Learner compute advantages and value targets of offline batches with the current policy; "
               "when False, those a record carries (RLlib writes PPO's) are used as they are."),
    Option("shuffle_buffer_size", 0, O, integer(0),
           doc="Shuffle offline batches over a sliding window of this many batches (0: read them in order)."),
    Option("output", None, O, offline_options.check_output,
           doc="Where to write every sampled batch: None (nowhere), 'logdir' (the trial directory), a "
               "directory, or a callable fn(ioctx) -> OutputWriter; see docs/offline.md."),
    Option("output_config", {}, O, offline_options.check_io_config,
           doc="Settings for writing output: {'format': 'json' (default) or 'parquet'}, and 'path' for "
               "output='dataset'."),
    Option("output_compress_columns", ["obs", "new_obs"], O, offline_options.check_columns,
           doc="Columns written compressed (zlib + base64 of the .npy bytes; RLlib uses LZ4) in JSON output."),
    Option("output_max_file_size", 64 * 1024 * 1024, O, integer(1),
           doc="Start a new output file once one holds this many bytes (when output_max_rows_per_file is None)."),
    Option("output_write_episodes", False, O, boolean,
           doc="True: one record (JSON line, Parquet row) per episode chunk; False: one record per sampled "
               "batch, rows are steps (RLlib's old-stack format). rlx's default is False, RLlib's new stack's "
               "True; see docs/offline.md."),
    Option("output_write_method", None, O, offline_options.check_write_method,
           doc="'write_parquet' or 'write_json': the files output is written as; None: output_config's format, "
               "else Parquet for configs that set output_max_rows_per_file or output_write_remaining_data (as "
               "RLlib's new-stack recorder writes) and JSON otherwise; see docs/offline.md."),
    Option("output_max_rows_per_file", None, O, integer(1, allow_none=True),
           doc="Buffer records and write files of exactly this many rows (episodes with output_write_episodes, "
               "else steps); None: files end by output_max_file_size."),
    Option("output_write_remaining_data", False, O, boolean,
           doc="With output_max_rows_per_file: write the rows still buffered when the Algorithm stops into a "
               "last, shorter file (False drops them, as in RLlib)."),
    # New-stack reading (rlx.offline.offline_data.OfflineData): setting any of these reads input_ through
    # ray.data when Ray is installed (rlx's embedded Parquet/JSON reading otherwise); see docs/offline.md.
    Option("offline_data_class", None, O, class_or_none,
           doc="OfflineData subclass that reads input_ (default rlx.offline.offline_data.OfflineData)."),
    Option("input_read_method", None, O, offline_options.check_read_method,
           doc="ray.data read function of input_ ('read_parquet', 'read_json', ...) or a callable fn(paths, "
               "**kwargs); None: by the files' extension (RLlib's default is 'read_parquet')."),
    Option("input_read_method_kwargs", {}, O, dictionary(),
           doc="Keyword arguments of the read function (e.g. {'override_num_blocks': 8})."),
    Option("input_read_schema", {}, O, offline_options.check_schema,
           doc="{column: the data's column name} for columns named differently in the data."),
    Option("input_read_episodes", False, O, boolean,
           doc="Each row is a whole episode (msgpack'ed SingleAgentEpisode state, as RLlib writes them)."),
    Option("input_read_sample_batches", False, O, boolean,
           doc="Each row is an old-stack SampleBatch record (RLlib's or rlx's JSON/Parquet output)."),
    Option("input_read_batch_size", None, O, integer(1, allow_none=True),
           doc="Rows the OfflinePreLearner maps at once (None: the sampled batch size)."),
    Option("input_filesystem", None, O, offline_options.check_filesystem,
           doc="Filesystem of input_: None (local), 'gcs', 's3', 'abs' or a pyarrow.fs.FileSystem."),
    Option("input_filesystem_kwargs", {}, O, dictionary(),
           doc="Keyword arguments of the filesystem."),
    Option("input_compress_columns", ["obs", "new_obs"], O, offline_options.check_columns,
           doc="Columns stored compressed in input_ (decompressed when they are strings)."),
    Option("input_spaces_jsonable", True, O, boolean,
           doc="RLlib: the spaces stored with the data are JSON-encoded.",
           no_effect="rlx takes the spaces from the config or env, not from the data"),
    Option("materialize_data", False, O, boolean,
           doc="Load the whole raw dataset into (object store) memory before mapping it."),
    Option("materialize_mapped_data", True, O, boolean,
           doc="Keep the mapped dataset in memory after the first pass (when it does not depend on the module)."),
    Option("map_batches_kwargs", {}, O, dictionary(),
           doc="Keyword arguments of Dataset.map_batches (e.g. {'concurrency': 2})."),
    Option("iter_batches_kwargs", {}, O, dictionary(),
           doc="Keyword arguments of Dataset.iter_batches (e.g. {'prefetch_batches': 2})."),
    Option("ignore_final_observation", False, O, boolean,
           doc="Replace each row's next observation by zeros (data without a new_obs column)."),
    Option("prelearner_class", None, O, class_or_none,
           doc="OfflinePreLearner subclass mapping raw rows to train batches."),
    Option("prelearner_buffer_class", None, O, class_or_none,
           doc="Episode buffer of the OfflinePreLearner with input_read_episodes/sample_batches "
               "(default EpisodeReplayBuffer)."),
    Option("prelearner_buffer_kwargs", {}, O, dictionary(),
           doc="Keyword arguments of that buffer (capacity, batch_size_B, ...)."),
    Option("prelearner_module_synch_period", 10, O, integer(1),
           doc="RLlib: updates between weight syncs to Ray Data's PreLearner actors.",
           no_effect="rlx's OfflinePreLearner maps rows without the RLModule"),
    Option("prelearner_use_recorded_module_states", False, O, boolean,
           doc="Keep the recorded recurrent states of episodes instead of recomputing them.",
           no_effect="rlx's OfflinePreLearner passes recorded columns through unchanged"),
    Option("dataset_num_iters_per_learner", None, O, integer(1, allow_none=True),
           doc="RLlib: batches each Learner reads from the dataset per training step.",
           no_effect="rlx's offline training step reads one batch of train_batch_size from the OfflineData"),
    Option("offline_sampling", False, O, boolean,
           doc="RLlib: sampling reads offline data, so EnvRunners do not split batches by sub-env.",
           no_effect="rlx reads offline input in the EnvRunnerGroup, whose batches never depend on sub-envs"),
]
