"""verl-advisor's knowledge base: data, not code.

verl_defaults/   verl's default trainer configs per version (generated from verl's YAMLs)
deprecated_keys.yaml   keys and values verl renamed or removed, with their replacements
...              see README.md in this folder for every file and where its facts come from
"""
