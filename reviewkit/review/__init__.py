"""The review file, the rubric, its checks and the gate verdict."""
