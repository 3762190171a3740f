"""Fine-tuning and evaluation on the paper's tasks and on your own data.

    readers   glue.py squad.py conll.py swag.py custom.py   files -> examples (common.py: records, file reading)
              hfdatasets.py                                  Hugging Face datasets as the same examples
    tasks     spec.py                                        name -> TaskSpec (family, reader, files, labels, metrics)
    encode    features.py squad_post.py                      examples -> features; QA windows (decoding: data/spans.py)
    embed     embedding.py                                   sentence-embedding pairs, losses, the bi-encoder
    scores    metrics.py                                     GLUE / SQuAD / CMRC / CoNLL / SWAG / retrieval metrics
    run       task_runner.py                                 features -> logits -> predictions -> scores / files
    load      loading.py                                     task model / tokenizer; fine-tuned dirs (Session)
    verbs     finetune.py evaluate.py predict.py             `clozeformer finetune | evaluate | predict` (never import each other)
    config    task_config.py                                 TaskDataConfig / FinetuneConfig / EvaluateConfig / PredictConfig

Importing this package loads nothing heavy; the verbs import torch when they run.
"""
