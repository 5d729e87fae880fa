{%- extends 'course_base.tpl' -%}
{#- The course's Manage Assignments (publish/formgrader): what `course release` released, each assignment's
    outcomes, and the steps. -#}
{%- set page = 'assignments' -%}
{%- block title -%}
作业
{%- endblock -%}
{%- block breadcrumbs -%}
<ol class="breadcrumb">
  <li class="active">作业</li>
</ol>
{%- endblock -%}
{%- block messages -%}
<div class="alert alert-info" id="course-steps">
<p>本课程的作业由课程命令发布、收集和评分，这一页只列出已发布的作业。formgrader 用于<b>人工评分</b>（书面题）和<b>复核</b>待复核的提交：
在左侧“人工评分”中打开提交；待复核的提交在各个列表中标为“待复核”并带有旗标，复核前它暂扣的分数不计入。
打开这样的提交，在横幅下点“计入”或“不计入”并写明理由，或逐题给分。</p>
<ol>
  <li>发布：<code>course release &lt;作业&gt;</code>，再 <code>course bundle &lt;作业&gt;</code> 打包发给学生</li>
  <li>收集：<code>course collect &lt;LMS 下载的 zip&gt; --assignment &lt;作业&gt;</code></li>
  <li>评分：<code>course grade &lt;作业&gt;</code>；复核：在这里，或 <code>course review</code></li>
  <li>反馈与成绩：<code>course feedback</code>、<code>course report</code>、<code>course export</code></li>
</ol>
<p>formgrader 自带的生成、发布、收集、自动评分和生成反馈按钮已去掉：它们会绕过课程的检查，或覆盖课程的中文反馈。</p>
</div>
{%- endblock -%}
{%- block table_header -%}
<tr>
  <th>作业</th>
  <th class="text-center">发布时间（UTC，<code>course release</code>）</th>
  <th class="text-center">notebook</th>
  <th class="text-center">提交数</th>
  <th class="text-center">各状态人数</th>
  <th class="text-center">人工评分</th>
</tr>
{%- endblock -%}
{%- block table_body -%}
{%- for a in assignments %}
<tr class="course-assignment">
  <td><a href="{{ base_url }}/formgrader/manage_submissions/{{ a.name }}">{{ a.name }}</a></td>
  <td class="text-center">已发布 {{ a.released }}</td>
  <td class="text-center">{{ a.notebooks | join("、") }}</td>
  <td class="text-center">{{ a.submissions }}</td>
  <td class="text-center course-counts">
    {%- for c in a.counts %}<span class="label course-status course-{{ c.status }}">{{ c.label }} {{ c.n }}</span> {% else %}—{% endfor -%}
  </td>
  <td class="text-center"><a href="{{ base_url }}/formgrader/gradebook/{{ a.name }}">打开</a></td>
</tr>
{%- else %}
<tr><td colspan="6">还没有发布任何作业：运行 <code>course release</code>。</td></tr>
{%- endfor %}
{%- endblock -%}
