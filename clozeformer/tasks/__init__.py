"""Fine-tuning and evaluation on the paper's tasks and on your own data.

    readers   glue.py squad.py conll.py swag.py custom.py   files -> examples (common.py: records, file reading)
    tasks     spec.py                                        name -> TaskSpec (family, reader, files, labels, metrics)
    encode    features.py squad_post.py                      examples -> features; QA windows (answers: clozeformer.data.spans)
    scores    metrics.py                                     GLUE / SQuAD / CMRC / CoNLL / SWAG metrics
    run       runner.py                                      features -> logits -> predictions -> scores / files
    load      loading.py                                     task model / tokenizer; fine-tuned dirs (Session)
    verbs     finetune.py evaluate.py predict.py             `clozeformer finetune | evaluate | predict` (never import each other)
    config    config.py                                      FinetuneConfig / EvaluateConfig / PredictConfig

Importing this package loads nothing heavy; the verbs import torch when they run.
"""
