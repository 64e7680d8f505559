"""A streamparse Bolt, as a streamparse project has it; Storm runs it as
``python -m streamparse.run streamparse_split.WordSplitter -s json`` in resources/."""
from streamparse import Bolt


class WordSplitter(Bolt):
    outputs = ["word"]

    def process(self, tup):
        for word in tup.values[0].split(" "):
            self.emit([word])
